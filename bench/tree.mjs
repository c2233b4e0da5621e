// A tree of mixed file sizes for the sync figures, and the commands that
// copy or drop one outside the timed windows.
import { spawnSync } from "node:child_process";
import { randomFillSync } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

// By bytes: a tenth in small files (1-16 KiB), three tenths in medium ones
// (64 KiB-1 MiB), the rest in large ones (4-64 MiB); 100 entries a
// directory, two levels deep. The content is random (no sparse or
// compressible shortcut) and the sizes come from a fixed seed, so every
// run writes the same tree.
const CLASSES = [
  { share: 0.1, min: 1 << 10, max: 16 << 10 },
  { share: 0.3, min: 64 << 10, max: 1 << 20 },
  { share: 0.6, min: 4 << 20, max: 64 << 20 },
];

/** Writes a tree of about mb MiB under dir; returns { files, bytes }. */
export function makeTree(dir, mb) {
  const total = mb * (1 << 20);
  const pool = randomFillSync(Buffer.alloc(72 << 20));
  let seed = 0x9e3779b9;
  const rand = () => { // mulberry32
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  let files = 0;
  let bytes = 0;
  for (const c of CLASSES) {
    for (let left = Math.round(total * c.share); left > 0;) {
      const size = Math.min(left, Math.round(c.min + rand() * (c.max - c.min)));
      const sub = path.join(dir, `d${Math.floor(files / 10000)}`, `d${Math.floor(files / 100) % 100}`);
      if (files % 100 === 0) mkdirSync(sub, { recursive: true });
      const at = Math.floor(rand() * (pool.length - size));
      writeFileSync(path.join(sub, `f${files}.bin`), pool.subarray(at, at + size));
      files++;
      bytes += size;
      left -= size;
    }
  }
  return { files, bytes };
}

/** Runs a shell command, failing on a non-zero exit. */
export function sh(script) {
  const r = spawnSync("sh", ["-c", script], { stdio: ["ignore", "ignore", "pipe"], encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${script}: exit ${r.status}: ${r.stderr}`);
}

/** Flushes dirty pages, so that a timed copy does not pay for the last one's writeback. */
export const flush = () => sh("sync");

export const drop = (dir) => rmSync(dir, { recursive: true, force: true });
