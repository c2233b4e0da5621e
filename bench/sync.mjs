// fake-plugin native sync of a tree of mixed file sizes (tree.mjs), in
// MB/s of the tree's bytes: environmentSyncIn from a host directory into
// the lease workspace, environmentSyncOut from there to a fresh host
// directory, each next to `tar -c | tar -x` of the same tree on the same
// file system: dir, where the worker's lease roots go too (its TMPDIR).
// After a warm-up round, rounds alternate whether tar or the worker goes
// first; dirty pages are flushed before every timed copy and the copies
// removed after it, untimed.
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import path from "node:path";
import { MB, nowMs, row } from "./lib.mjs";
import { drop, flush, makeTree, sh } from "./tree.mjs";

const CALL_MS = 600_000;
const base = { driverKey: "fake-plugin", companyId: "company-bench", environmentId: "env-bench", issueId: null, config: { image: "fake:bench", timeoutMs: 600_000, reuseLease: false } };

export async function syncFigures(host, { rounds, mb, dir, log }) {
  const scratch = mkdtempSync(path.join(dir, "bench-sync-"));
  const src = path.join(scratch, "tree");
  const tree = makeTree(src, mb);
  log(`sync tree in ${scratch}: ${tree.files} files, ${(tree.bytes / MB).toFixed(0)} MB`);
  const handle = host.handle("ours", { TMPDIR: scratch });
  await handle.start();
  const runs = { in: [], out: [], tar: [] };
  try {
    const got = await handle.call("environmentAcquireLease", { ...base, runId: randomUUID() }, CALL_MS);
    const lease = { providerLeaseId: got.providerLeaseId, metadata: got.metadata ?? {}, expiresAt: null };
    const { cwd } = await handle.call("environmentRealizeWorkspace", { ...base, lease, workspace: { mode: "isolated_workspace" } }, CALL_MS);
    const timed = async (fn) => {
      flush();
      const t0 = nowMs();
      await fn();
      return tree.bytes / MB / ((nowMs() - t0) / 1000);
    };
    const sync = async (method, from, to) => {
      const res = await handle.call(method, { ...base, lease, operations: [{ operationId: "bench", files: [{ sourcePath: from, targetPath: to, kind: "directory" }] }] }, CALL_MS);
      const op = res.operations[0];
      if (op.filesTransferred !== tree.files || op.bytesTransferred !== tree.bytes) throw new Error(`${method} moved ${JSON.stringify(op)}, want ${JSON.stringify(tree)}`);
    };
    // Round 0 warms the caches and the file system up and is not kept.
    for (let r = 0; r <= rounds; r++) {
      const inside = path.join(cwd, "in");
      const back = path.join(scratch, "out");
      const copy = path.join(scratch, "tar");
      const tar = () => timed(() => sh(`mkdir '${copy}' && tar -c -C '${src}' . | tar -x -C '${copy}'`));
      const m = {};
      if (r % 2) m.tar = await tar();
      m.in = await timed(() => sync("environmentSyncIn", src, inside));
      m.out = await timed(() => sync("environmentSyncOut", inside, back));
      m.tar ??= await tar();
      [inside, back, copy].forEach(drop);
      if (r === 0) continue;
      for (const k of ["in", "out", "tar"]) runs[k].push(m[k]);
      log(`sync round ${r}/${rounds}: in ${m.in.toFixed(0)} MB/s, out ${m.out.toFixed(0)} MB/s, tar ${m.tar.toFixed(0)} MB/s`);
    }
    await handle.call("environmentReleaseLease", { ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }, CALL_MS);
  } finally {
    await handle.stop();
    drop(scratch);
  }
  const note = `${tree.files} files, ${(tree.bytes / MB).toFixed(0)} MB, in ${dir}`;
  return [
    row(`fake environmentSyncIn, ${mb} MiB tree`, "MB/s", runs.in, runs.tar, { refName: "tar", note }),
    row(`fake environmentSyncOut, ${mb} MiB tree`, "MB/s", runs.out, runs.tar, { refName: "tar", note }),
  ];
}
