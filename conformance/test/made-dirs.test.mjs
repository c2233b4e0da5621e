// made-dirs.mjs: the run removes the worker's store directories it made,
// and nothing else.
import assert from "node:assert/strict";
import { chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { recordDirs, removeMade, workerStoreDirs } from "../made-dirs.mjs";

const uid = process.geteuid();

test("the worker's store is castore.DefaultDir's for a worker without HOME or TMPDIR", () => {
  assert.deepEqual(workerStoreDirs(65534), ["/tmp/sandbox-plugin-65534", "/tmp/sandbox-plugin-65534/createos-store"]);
});

function fill(dir) {
  mkdirSync(path.join(dir, "ab"), { recursive: true });
  writeFileSync(path.join(dir, "entry"), "x");
  writeFileSync(path.join(dir, "ab", "entry"), "y");
}

const pause = () => new Promise((r) => setTimeout(r, 100)); // older than the record by more than its slack

const cases = [
  { name: "both made by the run", during: (top, store) => fill(store), removed: ["store", "top"], kept: [] },
  { name: "the outer there before", before: (top) => mkdirSync(top), during: (top, store) => fill(store), removed: ["store"], kept: ["top (there before the run)"] },
  { name: "both there before", before: (top, store) => fill(store), during: (top, store) => fill(path.join(store, "more")), removed: [], kept: ["store (there before the run)", "top (there before the run)"] },
  {
    name: "there before, removed and made again", before: (top, store) => fill(store),
    during: (top, store) => { rmSync(top, { recursive: true }); fill(store); }, removed: [], kept: ["store (there before the run)", "top (there before the run)"],
  },
  {
    name: "the outer holds something else", during: (top, store) => { fill(store); writeFileSync(path.join(top, "other"), "x"); },
    removed: ["store"], kept: ["top (not empty)"],
  },
  {
    name: "the store a link", during: (top, store, outside) => { mkdirSync(top); symlinkSync(outside, store); },
    removed: [], kept: ["store (not a directory)", "top (not empty)"],
  },
  {
    name: "the store older than the run, moved in", before: (top) => fill(path.join(path.dirname(top), "old")),
    during: (top, store) => { mkdirSync(top); renameSync(path.join(path.dirname(top), "old"), store); },
    removed: [], kept: ["store (older than the run)", "top (not empty)"],
  },
  { name: "nothing made", during: () => {}, removed: [], kept: [] },
];

for (const c of cases) {
  test(`removeMade: ${c.name}`, async () => {
    const base = mkdtempSync(path.join(tmpdir(), "conformance-made-dirs-"));
    try {
      const top = path.join(base, "sandbox-plugin-1");
      const store = path.join(top, "createos-store");
      const outside = path.join(base, "outside");
      fill(outside);
      if (c.before) {
        c.before(top, store);
        await pause();
      }
      const rec = recordDirs(uid, [top, store]);
      c.during(top, store, outside);
      const { removed, kept } = removeMade(rec);
      const short = (s) => s.replaceAll(store, "store").replaceAll(top, "top");
      assert.deepEqual({ removed: removed.map(short), kept: kept.map(short) }, { removed: c.removed, kept: c.kept });
      for (const k of c.kept) assert.ok(lstatSync(k.startsWith("store") ? store : top), `${k} reported kept`);
      assert.ok(existsSync(path.join(outside, "ab", "entry")), "what a link named was touched");
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
}

test("removeMade keeps another user's directory", { skip: uid !== 0 && !process.env.CREATEOS_ISOLATION_REQUIRED && "needs root to make a directory of another user's (CI, which runs as root, sets CREATEOS_ISOLATION_REQUIRED and runs it)" }, () => {
  const base = mkdtempSync(path.join(tmpdir(), "conformance-made-dirs-"));
  try {
    const top = path.join(base, "sandbox-plugin-1");
    const store = path.join(top, "createos-store");
    const rec = recordDirs(0, [top, store]);
    fill(store);
    chownSync(store, 65534, 65534);
    const { removed, kept } = removeMade(rec);
    assert.deepEqual(removed, []);
    assert.match(kept[0], /\(not the workers' user's\)$/);
    assert.ok(existsSync(path.join(store, "entry")));
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
