// The Node SDK peer for make bench-host: a plugin with nothing but a health
// handler, served by @paperclipai/plugin-sdk's own worker RPC host.
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = process.env.BENCH_NODE_MODULES ?? path.join(here, "..", "conformance", "node_modules");
const sdk = await import(pathToFileURL(path.join(modules, "@paperclipai", "plugin-sdk", "dist", "index.js")).href);

const plugin = sdk.definePlugin({
  async setup() {},
  async onHealth() {
    return { status: "ok", message: "sdk peer healthy" };
  },
});
sdk.startWorkerRpcHost({ plugin });
