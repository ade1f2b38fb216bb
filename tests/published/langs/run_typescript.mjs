// Runs a corpus of one published schema through the generated TypeScript and ajv.
//
// Usage: node run_typescript.mjs CORPUS SCHEMA VALIDATORS_JS AJV_DIR OUT
//
// CORPUS is a file `published-corpus write` made; SCHEMA the vendored schema; VALIDATORS_JS the
// compiled `validators.js` generated from it; AJV_DIR the TypeScript client's `node_modules/ajv`.
// Each document is parsed with `JSON.parse` and checked by:
//
// - `typescript`: the generated `validate(key, value)` (the type by its `$defs` key): valid when it lists no violation;
// - `typescript-isValid`: the generated `isValid(name, value)`;
// - `ajv`: Ajv2020 (`strict: false`, formats not validated: they are annotations), against the
//   schema's `$defs` with a root of `{"$ref": "#/$defs/<type>"}`.
//
// Writes OUT: `{"verdicts": [{validator: verdict, ...}, ...]}` in corpus order, a verdict being
// `true`, `false` or the text of any exception.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [corpusPath, schemaPath, validatorsPath, ajvDir, outPath] = process.argv.slice(2);
const corpus = JSON.parse(readFileSync(corpusPath, "utf8"));
const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
const validators = await import(pathToFileURL(validatorsPath).href);
const require = createRequire(join(ajvDir, "package.json"));
const Ajv2020 = require(join(ajvDir, "dist/2020.js")).default;
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: false });
ajv.addSchema({ $schema: "https://json-schema.org/draft/2020-12/schema", $id: "published.json", $defs: schema.$defs });

function verdict(check) {
  try {
    return check();
  } catch (e) {
    return `${e?.name ?? "Error"}: ${e?.message ?? String(e)}`;
  }
}

const compiled = new Map();
function reference(def) {
  let v = compiled.get(def);
  if (v === undefined) {
    const pointer = def.replaceAll("~", "~0").replaceAll("/", "~1");
    v = ajv.getSchema(`published.json#/$defs/${pointer}`);
    compiled.set(def, v);
  }
  return v;
}

const out = corpus.docs.map((doc) => {
  const verdicts = { ajv: verdict(() => reference(doc.def)(JSON.parse(doc.text)) === true) };
  if (doc.type === null) {
    verdicts.typescript = verdicts["typescript-isValid"] = `no generated type for \`${doc.def}\``;
  } else {
    verdicts.typescript = verdict(() => validators.validate(doc.def, JSON.parse(doc.text)).length === 0);
    verdicts["typescript-isValid"] = verdict(() => validators.isValid(doc.type, JSON.parse(doc.text)) === true);
  }
  return verdicts;
});
writeFileSync(outPath, JSON.stringify({ verdicts: out }));
