// A worker entrypoint that sits between the host and the packaged worker
// and records every JSON-RPC line in both directions, so a suite can check
// what the host's worker manager does not expose (how many exit frames a
// route got, the size of each data chunk, the answer to a close the host
// sent on its own). The host forks it like any entrypoint; it starts the
// packaged worker's own entrypoint with the same Node, relays stdin and
// stdout byte for byte, passes stderr through, relays the signals the host
// sends and exits as the worker did.
//
// WIRE_TAP_ENTRY is the entrypoint to start and WIRE_TAP_FILE the file the
// records go to, one JSON object a line: {"dir":"in"|"out","line":"..."}.
// Both are removed from the environment the worker sees.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";

const entry = process.env.WIRE_TAP_ENTRY;
const file = process.env.WIRE_TAP_FILE;
if (!entry || !file) {
  process.stderr.write("wire-tap: WIRE_TAP_ENTRY and WIRE_TAP_FILE must be set\n");
  process.exit(1);
}
const env = { ...process.env };
delete env.WIRE_TAP_ENTRY;
delete env.WIRE_TAP_FILE;

// The fork's IPC channel must not keep this process alive.
process.channel?.unref?.();

const child = spawn(process.execPath, [entry], { stdio: ["pipe", "pipe", "inherit"], env });

/** Splits a byte stream into lines and records each whole one. */
function recorder(dir) {
  let rest = "";
  return (chunk) => {
    const text = rest + chunk.toString("utf8");
    const lines = text.split("\n");
    rest = lines.pop();
    if (lines.length > 0) appendFileSync(file, lines.map((line) => JSON.stringify({ dir, line }) + "\n").join(""));
  };
}

const recordIn = recorder("in");
const recordOut = recorder("out");
process.stdin.on("data", (chunk) => {
  recordIn(chunk);
  child.stdin.write(chunk);
});
process.stdin.on("end", () => child.stdin.end());
child.stdin.on("error", () => {});
child.stdout.on("data", (chunk) => {
  recordOut(chunk);
  process.stdout.write(chunk);
});

const relayed = ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"];
const relay = (signal) => {
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
};
for (const signal of relayed) process.on(signal, relay);
// "close": the worker exited and its stdout is drained.
child.on("close", (code, signal) => {
  const done = () => {
    if (signal) {
      for (const s of relayed) process.off(s, relay);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? 1);
  };
  if (process.stdout.writableNeedDrain) process.stdout.once("drain", done);
  else done();
});
