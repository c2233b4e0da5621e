// Regenerates host-exclude.json from the host's own code. From this directory,
// with the conformance suite installed (make conformance-install):
//   node host-exclude.mjs ../../../conformance/node_modules/@paperclipai/adapter-utils/dist > host-exclude.json
import path from "node:path";
import { pathToFileURL } from "node:url";

const dist = path.resolve(process.argv[2]);
const { excludePatternMatches } = await import(pathToFileURL(path.join(dist, "exclude-patterns.js")));
const { escapeTarExcludeLiteral } = await import(pathToFileURL(path.join(dist, "sandbox-managed-runtime.js")));

const patterns = ["", "*", "**", "*/*", "*//*", "*/*/*", "*/", "/*", "a", "a/", "/a", "a/b", "*/a", "a/*", "*/a/*",
  "*/a/b", "a/b/*", "*/a/b/*", "[", "app/[id]", "app/[id", "a{b,c}", "what?", "*.env", "x*", "*/x*", "a//b", ".", "./a",
  "node_modules", "node_modules/*", "*/node_modules", "*/node_modules/*", ".git", ".git/*"];
const rels = ["a", "a/b", "b/a", "b/a/c", "a/b/c", "x/a/b/y", "xa/b", "a/bc", "app/[id]", "app/[id]/p", "app/[id", "app/i",
  "*", "*/y", "s.env", "xy", "q/xy", "[", "ab", "a{b,c}", "what?", "whatx", "node_modules", "node_modules/x",
  "p/node_modules", "p/node_modules/q", "node_modules_x", ".git", ".git/HEAD", "sub/.git", ".github"];
const cases = [];
for (const p of patterns) for (const r of rels) cases.push([p, r, excludePatternMatches(r, p)]);
const escapes = ["secret[1].txt", "wildcard*name", "question?mark", "a\\b", "x[*?]\\y", "plain/path"]
  .map((e) => [e, escapeTarExcludeLiteral(e)]);
process.stdout.write(JSON.stringify({ source: "@paperclipai/adapter-utils@2026.916.1", cases, escapes }, null, 0)
  .replace(/\],\[/g, "],\n[") + "\n");
