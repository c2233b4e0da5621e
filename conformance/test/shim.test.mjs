// dist/worker.js on its own: what it does when the binary is missing or
// built for another platform, and that it relays exit status and signals.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { packageDir, packageJson } from "./host.mjs";

const scratch = mkdtempSync(path.join(tmpdir(), "conformance-shim-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

function copyPackage(name) {
  const dir = path.join(scratch, name);
  cpSync(packageDir, dir, { recursive: true });
  return dir;
}
const worker = (dir) => path.join(dir, packageJson.paperclipPlugin.worker);

test("missing binary: clear stderr message, exit 1, nothing on stdout", () => {
  const dir = copyPackage("missing");
  rmSync(path.join(dir, "bin", "sandbox-plugin"));
  const r = spawnSync(process.execPath, [worker(dir)], { input: "", encoding: "utf8" });
  assert.equal(r.status, 1);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, /bundled Go worker .* is missing/);
});

test("binary built for another platform: refuses with a message naming both", () => {
  const dir = copyPackage("foreign");
  const info = JSON.parse(readFileSync(path.join(dir, "bin", "worker.json"), "utf8"));
  const other = process.arch === "arm64" ? "x64" : "arm64";
  writeFileSync(path.join(dir, "bin", "worker.json"), JSON.stringify({ ...info, arch: other }));
  const r = spawnSync(process.execPath, [worker(dir)], { input: "", encoding: "utf8" });
  assert.equal(r.status, 1);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, new RegExp(`built for ${info.platform}/${other}, but this host runs ${process.platform}/${process.arch}`));
});

test("stdout carries only the worker's protocol lines; exit status 0 after shutdown", () => {
  const input = [
    { jsonrpc: "2.0", id: 1, method: "initialize", params: { manifest: {}, config: {} } },
    { jsonrpc: "2.0", id: 2, method: "shutdown", params: {} },
  ].map((m) => JSON.stringify(m)).join("\n") + "\n";
  const r = spawnSync(process.execPath, [worker(packageDir)], { input, encoding: "utf8", env: { PATH: process.env.PATH } });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  assert.ok(lines.every((m) => m.jsonrpc === "2.0"));
  assert.deepEqual(lines.filter((m) => "id" in m).map((m) => m.id), [1, 2]);
});

test("SIGTERM is forwarded and the worker's clean exit is relayed", async () => {
  const child = spawn(process.execPath, [worker(packageDir)], { stdio: ["pipe", "pipe", "pipe"], env: { PATH: process.env.PATH } });
  let out = "";
  child.stdout.on("data", (d) => { out += d; });
  child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "health", params: {} })}\n`);
  while (!out.includes('"id":1')) await new Promise((r) => setTimeout(r, 10));
  child.kill("SIGTERM");
  const [code, signal] = await new Promise((resolve) => child.on("exit", (c, s) => resolve([c, s])));
  assert.deepEqual([code, signal], [0, null], "the Go worker handles SIGTERM and exits 0; the shim exits the same way");
});
