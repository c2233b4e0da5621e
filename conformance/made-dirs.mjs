// The worker's sync store, as the suite leaves it. The host starts plugin
// workers without HOME or TMPDIR and passes none of our variables, so the
// createos driver keeps its store where castore.DefaultDir puts it then:
// /tmp/sandbox-plugin-<uid>/createos-store, uid the worker's (the suite's
// own: the host code runs in this process). Outside a test it is the
// operator's cache and nothing removes it. run-tests.mjs records, before
// any test file starts a worker, which of those directories are there,
// and once every file is done removes the ones the run made
// (recordDirs, removeMade). The sandboxes' stores are in the sim's
// sandbox directories, which the sim removes with each sandbox and
// createos-sim.mjs removes with the sim's directory.
import { lstatSync, readdirSync, rmSync, rmdirSync } from "node:fs";
import path from "node:path";

/** The directories a worker running as uid without HOME or TMPDIR makes for its store, outermost first. */
export function workerStoreDirs(uid) {
  const top = path.join("/tmp", `sandbox-plugin-${uid}`);
  return [top, path.join(top, "createos-store")];
}

// A file's times come from the kernel's coarse clock, up to a tick behind
// the process clock: a directory made just after the record must not look
// older than it.
const clockSlackNs = 50_000_000n;

function lstat(p) {
  try {
    return lstatSync(p, { bigint: true });
  } catch (err) {
    if (err.code === "ENOENT") return null;
    throw err;
  }
}

/** Records, now, which of paths (outermost first) are there, for a run whose workers run as uid. */
export function recordDirs(uid, paths) {
  const since = BigInt(Date.now()) * 1_000_000n - clockSlackNs;
  return { uid, since, dirs: paths.map((p) => ({ path: p, was: lstat(p) })) };
}

/**
 * Why the directory at p, now st, is not provably the run's ("" when it
 * is): a directory (not a link) of the workers' user, born at or after the
 * record (its change time where the file system keeps no birth time).
 */
function notMade(rec, st) {
  if (!st.isDirectory()) return "not a directory";
  if (st.uid !== BigInt(rec.uid)) return "not the workers' user's";
  const born = st.birthtimeNs > 0n ? st.birthtimeNs : st.ctimeNs;
  if (born < rec.since) return "older than the run";
  return "";
}

/**
 * Removes, innermost first, each directory the run made: one that was not
 * there at the record and is now provably the run's (notMade). One that
 * was there is kept, replaced or not; an outer one is removed only when it
 * is empty once the inner ones are gone; nothing is followed through a
 * link. Returns { removed, kept } (kept: "path (why)").
 */
export function removeMade(rec) {
  const removed = [];
  const kept = [];
  for (let i = rec.dirs.length - 1; i >= 0; i--) {
    const { path: p, was } = rec.dirs[i];
    if (was) {
      kept.push(`${p} (there before the run)`);
      continue;
    }
    const st = lstat(p);
    if (!st) continue;
    const why = notMade(rec, st);
    if (why) {
      kept.push(`${p} (${why})`);
      continue;
    }
    if (i === rec.dirs.length - 1) {
      // rmSync unlinks a link it meets inside, never what it names.
      for (const name of readdirSync(p)) rmSync(path.join(p, name), { recursive: true, force: true });
    }
    try {
      rmdirSync(p);
      removed.push(p);
    } catch (err) {
      if (err.code !== "ENOTEMPTY" && err.code !== "EEXIST") throw err;
      kept.push(`${p} (not empty)`);
    }
  }
  return { removed, kept };
}
