// Package api is the CreateOS HTTP API client the createos driver talks to
// the provider through: requests to ${origin}/v1 with the X-Api-Key header
// and no redirects, each waiting for its turn on its account's scheduler
// (createos/sched; Client.Live and Client.Ending for a live session's
// requests, Client.Admit and Client.Turn for a turn taken before the
// request is built), JSend envelopes decoded into Objects, the sandbox
// control plane (create, fork, get, list, transitions, egress, files, exec),
// the NDJSON process streams (ExecStream, Follower) and the errors an
// operator reads: APIError for a non-2xx answer, which names the status and
// an operation chosen from the path, never the body or the URL.
package api
