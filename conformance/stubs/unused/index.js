// See package.json: the conformance suite loads only the worker manager and
// plugin loader of @paperclipai/server; any other server dependency is
// replaced by this stub, which fails loudly if something does load it.
throw new Error("paperclip conformance: a stubbed @paperclipai/server dependency was loaded; add it to conformance/package.json's kept dependencies");
