// fake-plugin native sync of a tree of mixed file sizes (tree.mjs), in
// MB/s of the tree's bytes: environmentSyncIn from a host directory into
// the lease workspace, environmentSyncOut from there to a fresh host
// directory, each next to `tar -c | tar -x` of the same tree on the same
// file system. Rounds alternate whether tar or the worker goes first;
// dirty pages are flushed before every timed copy and the copies removed
// after it, untimed.
import { randomUUID } from "node:crypto";
import path from "node:path";
import { MB, nowMs, row } from "./lib.mjs";
import { drop, flush, makeTree, sh } from "./tree.mjs";

const CALL_MS = 600_000;
const base = { driverKey: "fake-plugin", companyId: "company-bench", environmentId: "env-bench", issueId: null, config: { image: "fake:bench", timeoutMs: 600_000, reuseLease: false } };

export async function syncFigures(host, { rounds, mb, scratch, log }) {
  const src = path.join(scratch, "tree");
  const tree = makeTree(src, mb);
  log(`sync tree: ${tree.files} files, ${(tree.bytes / MB).toFixed(0)} MB`);
  const handle = host.handle("ours");
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
    for (let r = 0; r < rounds; r++) {
      const inside = path.join(cwd, "in");
      const back = path.join(scratch, "out");
      const copy = path.join(scratch, "tar");
      const tar = () => timed(() => sh(`mkdir '${copy}' && tar -c -C '${src}' . | tar -x -C '${copy}'`));
      const theirs = r % 2 === 0 ? await tar() : null;
      runs.in.push(await timed(() => sync("environmentSyncIn", src, inside)));
      runs.out.push(await timed(() => sync("environmentSyncOut", inside, back)));
      runs.tar.push(theirs ?? await tar());
      [inside, back, copy].forEach(drop);
      log(`sync round ${r + 1}/${rounds}: in ${runs.in[r].toFixed(0)} MB/s, out ${runs.out[r].toFixed(0)} MB/s, tar ${runs.tar[r].toFixed(0)} MB/s`);
    }
    await handle.call("environmentReleaseLease", { ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }, CALL_MS);
  } finally {
    await handle.stop();
    drop(src);
  }
  const note = `${tree.files} files, ${(tree.bytes / MB).toFixed(0)} MB`;
  return [
    row(`fake environmentSyncIn, ${mb} MiB tree`, "MB/s", runs.in, runs.tar, { refName: "tar", note }),
    row(`fake environmentSyncOut, ${mb} MiB tree`, "MB/s", runs.out, runs.tar, { refName: "tar", note }),
  ];
}
