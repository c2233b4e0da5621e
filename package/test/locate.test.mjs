// dist/locate.js: which Go worker the shim starts on which host, and what
// it says when there is none. Run with `node --test package/test/`.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { checkWorkerInfo, listedPlatforms, locateWorker, platformPackageName } from "../dist/locate.js";

const root = "/plugins/node_modules/paperclip-plugin-go-sandbox";
const release = {
  name: "paperclip-plugin-go-sandbox",
  version: "1.2.3",
  optionalDependencies: {
    "paperclip-go-sandbox-linux-x64": "1.2.3",
    "paperclip-go-sandbox-linux-arm64": "1.2.3",
    "paperclip-go-sandbox-darwin-x64": "1.2.3",
    "paperclip-go-sandbox-darwin-arm64": "1.2.3",
  },
};
const single = { name: "paperclip-plugin-go-sandbox", version: "1.2.3" };
const installed = (names) => (name) => (names.includes(name) ? `/plugins/node_modules/${name}/package.json` : null);

test("platform packages are named for Node's platform and arch", () => {
  assert.equal(platformPackageName("darwin", "arm64"), "paperclip-go-sandbox-darwin-arm64");
  assert.deepEqual(listedPlatforms(release), ["darwin-arm64", "darwin-x64", "linux-arm64", "linux-x64"]);
  assert.deepEqual(listedPlatforms({ ...single, optionalDependencies: { "left-pad": "1.0.0" } }), []);
});

test("locateWorker: the host's worker, or why there is none", () => {
  const cases = [
    {
      name: "bundled worker of a single-platform build",
      o: { pkg: single, platform: "linux", arch: "x64", bundled: true, installed: [] },
      want: { binDir: path.join(root, "bin"), origin: null },
    },
    {
      name: "a bundled worker wins over platform packages",
      o: { pkg: release, platform: "linux", arch: "x64", bundled: true, installed: ["paperclip-go-sandbox-linux-x64"] },
      want: { binDir: path.join(root, "bin"), origin: null },
    },
    ...["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"].map((p) => {
      const [platform, arch] = p.split("-");
      const name = `paperclip-go-sandbox-${p}`;
      return {
        name: `release on ${p}: the installed platform package`,
        o: { pkg: release, platform, arch, bundled: false, installed: [name] },
        want: { binDir: `/plugins/node_modules/${name}/bin`, origin: name },
      };
    }),
    {
      name: "release on a platform it does not ship",
      o: { pkg: release, platform: "win32", arch: "x64", bundled: false, installed: [] },
      error: /no prebuilt Go worker for win32\/x64 \(it ships darwin-arm64, darwin-x64, linux-arm64, linux-x64\); build the package on this machine .*make package/,
    },
    {
      name: "release on an arch it does not ship",
      o: { pkg: release, platform: "linux", arch: "ia32", bundled: false, installed: ["paperclip-go-sandbox-linux-x64"] },
      error: /no prebuilt Go worker for linux\/ia32/,
    },
    {
      name: "release whose platform package npm left out",
      o: { pkg: release, platform: "darwin", arch: "arm64", bundled: false, installed: ["paperclip-go-sandbox-darwin-x64"] },
      error: /platform package paperclip-go-sandbox-darwin-arm64@1\.2\.3 .* is not installed next to paperclip-plugin-go-sandbox; .*--omit=optional/,
    },
    {
      name: "a package with neither",
      o: { pkg: single, platform: "linux", arch: "x64", bundled: false, installed: [] },
      error: /has no Go worker: neither bin\/worker\.json nor platform packages/,
    },
  ];
  for (const c of cases) {
    const got = locateWorker({
      pkg: c.o.pkg, root, platform: c.o.platform, arch: c.o.arch,
      exists: (f) => c.o.bundled && f === path.join(root, "bin", "worker.json"),
      resolve: installed(c.o.installed),
    });
    if (c.error) {
      assert.match(got.error ?? "", c.error, c.name);
    } else {
      assert.deepEqual(got, c.want, c.name);
    }
  }
});

test("checkWorkerInfo: a worker.json for this host and version, naming a binary beside it", () => {
  const binDir = "/plugins/node_modules/paperclip-go-sandbox-linux-x64/bin";
  const host = { binDir, origin: "paperclip-go-sandbox-linux-x64", platform: "linux", arch: "x64", version: "1.2.3" };
  const good = { binary: "sandbox-plugin", platform: "linux", arch: "x64", goos: "linux", goarch: "amd64", version: "1.2.3", args: [] };
  const cases = [
    { name: "valid", info: good, want: { binary: path.join(binDir, "sandbox-plugin"), args: [] } },
    { name: "driver flags are passed", info: { ...good, args: ["--drivers=fake-plugin"] }, want: { binary: path.join(binDir, "sandbox-plugin"), args: ["--drivers=fake-plugin"] } },
    { name: "no args", info: { ...good, args: undefined }, want: { binary: path.join(binDir, "sandbox-plugin"), args: [] } },
    { name: "another arch", info: { ...good, arch: "arm64" }, error: /Go worker in paperclip-go-sandbox-linux-x64 was built for linux\/arm64, but this host runs linux\/x64/ },
    { name: "another platform, bundled", info: { ...good, platform: "darwin" }, host: { origin: null }, error: /^the bundled Go worker was built for darwin\/x64/ },
    { name: "another release", info: { ...good, version: "1.2.2" }, error: /is version 1\.2\.2, but the plugin package is 1\.2\.3; reinstall/ },
    { name: "binary outside bin/", info: { ...good, binary: "../../evil/sandbox-plugin" }, error: /names a binary outside/ },
    { name: "binary in a subdirectory", info: { ...good, binary: "sub/sandbox-plugin" }, error: /names a binary outside/ },
    { name: "args not strings", info: { ...good, args: [1] }, error: /args must be an array of strings/ },
    { name: "no version", info: { ...good, version: undefined }, error: /version must be a string/ },
    { name: "not an object", info: [good], error: /not a JSON object/ },
    { name: "null", info: null, error: /not a JSON object/ },
  ];
  for (const c of cases) {
    const got = checkWorkerInfo(c.info, { ...host, ...c.host });
    if (c.error) {
      assert.match(got.error ?? "", c.error, c.name);
    } else {
      assert.deepEqual(got, c.want, c.name);
    }
  }
});
