// Runs every case of the manifest through the TypeScript generated for its group.
//
// Usage: node run_typescript.mjs MANIFEST DIST
//
// DIST holds the compiled `<module>/validators.js` of each group. Each case's JSON text is parsed
// with `JSON.parse` and checked the two ways the TypeScript client checks a document against a
// named type: `validate(name, value)` (every violation; valid when there are none) and
// `isValid(name, value)` (the fast check). Prints one JSON object: for each group's module, one
// entry per case mapping each path to its verdict: `true` (valid), `false` (invalid) or the text of
// any exception.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [manifestPath, dist] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));

function verdict(check) {
  try {
    return check();
  } catch (e) {
    return `${e?.name ?? "Error"}: ${e?.message ?? String(e)}`;
  }
}

const out = {};
for (const group of manifest.groups) {
  let validators;
  try {
    validators = await import(pathToFileURL(join(dist, group.module, "validators.js")).href);
  } catch (e) {
    out[group.module] = group.cases.map(() => ({ load: `cannot load the generated module: ${e}` }));
    continue;
  }
  out[group.module] = group.cases.map((c) => ({
    validate: verdict(() => validators.validate(group.root, JSON.parse(c.data)).length === 0),
    isValid: verdict(() => validators.isValid(group.root, JSON.parse(c.data)) === true),
  }));
}
process.stdout.write(JSON.stringify(out));
