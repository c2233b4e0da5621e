// Paperclip starts a plugin worker with child_process.fork(), which always
// runs Node. This shim is that Node entrypoint: it finds the Go worker for
// this host (./locate.js: the package's own bin/, or the platform package
// npm installed next to it), starts it with the same stdin, stdout and
// stderr, so the JSON-RPC bytes never pass through Node, and then only
// relays signals and the exit status. It writes nothing to stdout;
// diagnostics go to stderr, which the host logs and appends to its failure
// messages.
import { spawn } from "node:child_process";
import { constants as fsConstants, accessSync, existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { constants as osConstants } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { checkWorkerInfo, locateWorker } from "./locate.js";

const PREFIX = "paperclip-plugin-go-sandbox worker shim";
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

// The fd-3 IPC channel that fork() opens is not part of the protocol; it
// must not keep this process alive once the Go worker is gone.
if (process.channel && typeof process.channel.unref === "function") {
  process.channel.unref();
}

function fail(message) {
  process.stderr.write(`${PREFIX}: ${message}\n`);
  process.exit(1);
}

function readJSON(file, what) {
  let raw;
  try {
    raw = readFileSync(file, "utf8");
  } catch (err) {
    fail(`cannot read ${file} (${err.code ?? err.message}); ${what}`);
  }
  try {
    return JSON.parse(raw);
  } catch (err) {
    fail(`${file} is not valid: ${err.message}`);
  }
}

// resolvePackage is the package.json of an installed package, as Node
// resolves it from this package; null when it is not installed.
const requireHere = createRequire(path.join(root, "package.json"));
function resolvePackage(name) {
  try {
    return requireHere.resolve(`${name}/package.json`);
  } catch {
    return null;
  }
}

// findWorker is the binary to start and its arguments; it fails with a
// message saying what to do when there is none for this host.
function findWorker() {
  const pkg = readJSON(path.join(root, "package.json"), "the package is incomplete, reinstall it");
  const host = { platform: process.platform, arch: process.arch };
  const where = locateWorker({ pkg, root, ...host, exists: existsSync, resolve: resolvePackage });
  if (where.error) fail(where.error);
  const reinstall = where.origin === null
    ? `the package is incomplete, reinstall it or rebuild it with "make package"`
    : `the platform package ${where.origin} is incomplete, reinstall the plugin`;
  const info = readJSON(path.join(where.binDir, "worker.json"), reinstall);
  const worker = checkWorkerInfo(info, { ...where, ...host, version: pkg.version });
  if (worker.error) fail(worker.error);
  try {
    accessSync(worker.binary, fsConstants.X_OK);
  } catch (err) {
    const why = err.code === "ENOENT" ? "is missing" : `is not executable (${err.code ?? err.message})`;
    const what = where.origin === null ? "the bundled Go worker" : `the Go worker of ${where.origin}`;
    fail(`${what} ${worker.binary} ${why}; ${reinstall}`);
  }
  return worker;
}

const { binary, args } = findWorker();
const child = spawn(binary, args, {
  stdio: "inherit", // fds 0-2 only: the IPC fd is not passed on
  env: process.env, // the host already scrubbed it; pass it through unchanged
});

const relayed = ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"];
for (const signal of relayed) {
  process.on(signal, () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
    }
  });
}

child.on("error", (err) => {
  fail(`cannot start the Go worker ${binary}: ${err.message}`);
});

child.on("exit", (code, signal) => {
  if (signal === null) {
    process.exit(code ?? 1);
  }
  // Die of the same signal, so the host sees what happened to the worker;
  // fall back to the shell convention when the signal does not end us.
  const number = osConstants.signals[signal] ?? 0;
  for (const s of relayed) process.removeAllListeners(s);
  try {
    process.kill(process.pid, signal);
  } catch {
    // fall through to the exit code
  }
  setTimeout(() => process.exit(128 + number), 200);
});
