// The package as the host's loader sees it: name, entrypoints, manifest
// module, manifest validation, the worker environment, the packed tarball.
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  importManifest, instanceInfo, loader, manifestValidatorModule, packageDir, packageJson, shared, tarList,
} from "./host.mjs";

test("package name is a Paperclip plugin package name", () => {
  assert.equal(loader.isPluginPackageName(packageJson.name), true);
  assert.equal(loader.NPM_PLUGIN_PACKAGE_PREFIX, "paperclip-plugin-");
});

test("declared entrypoints all exist", () => {
  assert.deepEqual(packageJson.paperclipPlugin, { manifest: "./dist/manifest.js", worker: "./dist/worker.js" });
  assert.deepEqual(loader.listMissingDeclaredPluginEntrypoints(packageDir, packageJson), []);
  const declared = loader.resolveDeclaredPluginEntrypoints(packageDir, packageJson).map((e) => e.key).sort();
  assert.deepEqual(declared, ["manifest", "worker"]);
});

test("package.json names the platform the bundled binary was built for", () => {
  assert.deepEqual(packageJson.os, [process.platform]);
  assert.deepEqual(packageJson.cpu, [process.arch]);
});

test("manifest module imports and passes Paperclip's manifest validator", async () => {
  const manifest = await importManifest();
  const parsed = shared.pluginManifestV1Schema.safeParse(manifest);
  assert.equal(parsed.success, true, JSON.stringify(parsed.error?.issues));
  const result = manifestValidatorModule.pluginManifestValidator().parse(manifest);
  assert.equal(result.success, true, JSON.stringify(result.errors));
  assert.ok(manifestValidatorModule.pluginManifestValidator().getSupportedVersions().includes(manifest.apiVersion));
  assert.equal(manifest.version, packageJson.version);
  assert.equal(manifest.entrypoints.worker, packageJson.paperclipPlugin.worker);
  assert.ok(manifest.capabilities.includes("environment.drivers.register"));
  const keys = manifest.environmentDrivers.map((d) => d.driverKey);
  assert.ok(keys.includes("fake-plugin"), `drivers: ${keys}`);
  for (const d of manifest.environmentDrivers) assert.equal(d.kind, "sandbox_provider", d.driverKey);
});

test("worker environment from buildPluginWorkerEnv has no HOME and no host secrets", async () => {
  const manifest = await importManifest();
  const env = loader.buildPluginWorkerEnv({
    manifest, packageName: packageJson.name, packagePath: packageDir, instanceInfo,
    processEnv: { HOME: "/root", USER: "root", DATABASE_URL: "postgres://secret", BETTER_AUTH_SECRET: "s", DAYTONA_API_KEY: "d", PATH: "/usr/bin" },
  });
  assert.deepEqual(Object.keys(env).sort(), ["PAPERCLIP_DEPLOYMENT_EXPOSURE", "PAPERCLIP_DEPLOYMENT_MODE"]);
});

test("the packed tarball holds exactly the package directory", () => {
  const out = path.dirname(packageDir);
  const tgz = readdirSync(out).filter((f) => f === `${packageJson.name}-${packageJson.version}.tgz`);
  assert.equal(tgz.length, 1, `no ${packageJson.name}-${packageJson.version}.tgz in ${out}`);
  assert.deepEqual(tarList(path.join(out, tgz[0])), [
    "package/README.md", "package/bin/sandbox-plugin", "package/bin/worker.json",
    "package/dist/manifest.js", "package/dist/worker.js", "package/package.json",
  ]);
});
