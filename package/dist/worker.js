// Paperclip starts a plugin worker with child_process.fork(), which always
// runs Node. This shim is that Node entrypoint: it starts the Go worker
// bundled in ../bin with the same stdin, stdout and stderr, so the JSON-RPC
// bytes never pass through Node, and then only relays signals and the exit
// status. It writes nothing to stdout; diagnostics go to stderr, which the
// host logs and appends to its failure messages.
import { spawn } from "node:child_process";
import { constants as fsConstants, accessSync, readFileSync } from "node:fs";
import { constants as osConstants } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const PREFIX = "paperclip-plugin-go-sandbox worker shim";
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const binDir = path.join(root, "bin");
const infoPath = path.join(binDir, "worker.json");

// The fd-3 IPC channel that fork() opens is not part of the protocol; it
// must not keep this process alive once the Go worker is gone.
if (process.channel && typeof process.channel.unref === "function") {
  process.channel.unref();
}

function fail(message) {
  process.stderr.write(`${PREFIX}: ${message}\n`);
  process.exit(1);
}

function readWorkerInfo() {
  let raw;
  try {
    raw = readFileSync(infoPath, "utf8");
  } catch (err) {
    fail(`cannot read ${infoPath} (${err.code ?? err.message}); the package is incomplete, reinstall it or rebuild it with "make package"`);
  }
  try {
    const info = JSON.parse(raw);
    if (typeof info.binary !== "string" || typeof info.platform !== "string" || typeof info.arch !== "string") {
      throw new Error("binary, platform and arch must be strings");
    }
    if (info.args !== undefined && !(Array.isArray(info.args) && info.args.every((a) => typeof a === "string"))) {
      throw new Error("args must be an array of strings");
    }
    return info;
  } catch (err) {
    fail(`${infoPath} is not valid: ${err.message}`);
  }
}

const info = readWorkerInfo();
if (info.platform !== process.platform || info.arch !== process.arch) {
  fail(`the bundled Go worker was built for ${info.platform}/${info.arch}, but this host runs ${process.platform}/${process.arch}; install the package built for ${process.platform}/${process.arch} (make package PACKAGE_GOOS=... PACKAGE_GOARCH=...)`);
}
const binary = path.resolve(binDir, info.binary);
if (path.dirname(binary) !== binDir) {
  fail(`${infoPath} names a binary outside ${binDir}`);
}
try {
  accessSync(binary, fsConstants.X_OK);
} catch (err) {
  const why = err.code === "ENOENT" ? "is missing" : `is not executable (${err.code ?? err.message})`;
  fail(`the bundled Go worker ${binary} ${why}; reinstall the package or rebuild it with "make package"`);
}

const child = spawn(binary, info.args ?? [], {
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
  fail(`cannot start the bundled Go worker ${binary}: ${err.message}`);
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
