// Runs the suite (node --test with the given files) and then removes the
// worker's sync store directories the run made (made-dirs.mjs): the test
// files run as processes of their own, side by side, so only the run as a
// whole knows when no worker of it is left. Exits as the suite did.
import { spawn } from "node:child_process";
import { recordDirs, removeMade, workerStoreDirs } from "./made-dirs.mjs";

const uid = process.geteuid?.();
const record = uid === undefined ? null : recordDirs(uid, workerStoreDirs(uid));

const child = spawn(process.execPath, ["--test", ...process.argv.slice(2)], { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("exit", (code, signal) => {
  let cleanupFailed = false;
  if (record) {
    try {
      const { removed, kept } = removeMade(record);
      for (const r of removed) console.log(`conformance: removed the worker's sync store directory the run made: ${r}`);
      for (const k of kept) console.log(`conformance: kept the worker's sync store directory: ${k}`);
    } catch (err) {
      console.error(`conformance: the worker's sync store: ${err.message}`);
      cleanupFailed = true;
    }
  }
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(code === 0 && cleanupFailed ? 1 : (code ?? 1));
});
