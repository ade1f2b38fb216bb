#!/usr/bin/env node
// Benchmark (not a test): the TypeScript validators generated from the vendored ACP v1 and MCP
// 2026-07-28 schemas against ajv's compiled validators, on the documents of
// tests/bench-published/corpus.json, side by side in one run.
//
//   node tests/bench-published/ts/bench.mjs [SECONDS_PER_SET]      (from the workspace root)
//
// For each schema the script runs `openagents-codegen typescript` (target/debug, else
// target/release; $OPENAGENTS_CODEGEN overrides) into target/bench-published/ts/<schema>/generated,
// next to a copy of clients/typescript/src/rt.ts, and compiles both with the client's tsc. ajv is
// the client's ajv (Ajv2020, `strict: false`, `validateFormats: false`), given the schema's $defs
// once and asked for `#/$defs/<type>`, compiled before anything is timed. Documents are parsed
// with JSON.parse once; what is timed is the check of the parsed value:
//
//   isValid   the generated `isValid(type, doc)` (the fast path)
//   validate  the generated `validate(type, doc)` (fast path, violations only when it fails)
//   ajv       the compiled ajv function
//   ajv discriminator   the same with ajv's `discriminator: true` option (oneOf tagged by a
//             `discriminator` keyword, as ACP's unions are, picks the branch by the tag)
//
// The four run round-robin in short batches with the order rotating each round; the medians are
// compared. Every document must be accepted by all four, and a broken copy refused, before
// anything is timed.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const seconds = Number(process.argv[2] ?? process.env.PUBLISHED_BENCH_SECONDS ?? 3);
const corpus = JSON.parse(readFileSync(join(root, "tests/bench-published/corpus.json"), "utf8"));
const codegen =
  process.env.OPENAGENTS_CODEGEN ??
  [join(root, "target/debug/openagents-codegen"), join(root, "target/release/openagents-codegen")].find((p) => existsSync(p));
if (!codegen) throw new Error("no openagents-codegen binary: run `cargo build -p openagents-codegen` first");
const tsc = join(root, "clients/typescript/node_modules/.bin/tsc");
const ajvDir = join(root, "clients/typescript/node_modules/ajv");
const require = createRequire(join(ajvDir, "package.json"));
const Ajv2020 = require(join(ajvDir, "dist/2020.js")).default;
const ajvVersion = JSON.parse(readFileSync(join(ajvDir, "package.json"), "utf8")).version;

function run(cmd, args) {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "inherit", "inherit"] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${r.status ?? r.signal})`);
}

/** Generates and compiles the TypeScript of one schema; answers its validators module. */
async function generated(schema) {
  const dir = join(root, "target/bench-published/ts", schema);
  mkdirSync(dir, { recursive: true });
  run(codegen, ["typescript", "--schema", join(root, "tests/third-party-schemas", `${schema}.schema.json`), "--out-dir", join(dir, "generated"), "--runtime", "../rt.js"]);
  copyFileSync(join(root, "clients/typescript/src/rt.ts"), join(dir, "rt.ts"));
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2022"], types: [], strict: true, rootDir: ".", outDir: "dist", skipLibCheck: true },
      include: ["rt.ts", "generated/*.ts"],
    }),
  );
  writeFileSync(join(dir, "package.json"), '{"type": "module"}\n');
  run(tsc, ["-p", join(dir, "tsconfig.json")]);
  return import(pathToFileURL(join(dir, "dist/generated/validators.js")).href);
}

const schemas = [...new Set(corpus.sets.map((s) => s.schema))];
const modules = {};
const ajvs = {};
const ajvsDiscriminator = {};
for (const schema of schemas) {
  modules[schema] = await generated(schema);
  const text = JSON.parse(readFileSync(join(root, "tests/third-party-schemas", `${schema}.schema.json`), "utf8"));
  const ajv = new Ajv2020({ strict: false, validateFormats: false });
  ajv.addSchema({ $schema: "https://json-schema.org/draft/2020-12/schema", $id: `${schema}.json`, $defs: text.$defs });
  ajvs[schema] = ajv;
  const withDiscriminator = new Ajv2020({ strict: false, validateFormats: false, discriminator: true });
  withDiscriminator.addSchema({ $schema: "https://json-schema.org/draft/2020-12/schema", $id: `${schema}.json`, $defs: text.$defs });
  ajvsDiscriminator[schema] = withDiscriminator;
}

const CASES = ["isValid", "validate", "ajv", "ajv discriminator"];

function prepare(set) {
  const v = modules[set.schema];
  const check = ajvs[set.schema].getSchema(`${set.schema}.json#/$defs/${set.type}`);
  const checkTagged = ajvsDiscriminator[set.schema].getSchema(`${set.schema}.json#/$defs/${set.type}`);
  if (typeof check !== "function" || typeof checkTagged !== "function") throw new Error(`ajv: no schema for ${set.type}`);
  const type = set.type;
  const docs = set.docs.map((t) => JSON.parse(t));
  const cases = [
    (ds) => {
      let n = 0;
      for (const d of ds) if (v.isValid(type, d)) n++;
      return n;
    },
    (ds) => {
      let n = 0;
      for (const d of ds) if (v.validate(type, d).length === 0) n++;
      return n;
    },
    (ds) => {
      let n = 0;
      for (const d of ds) if (check(d) === true) n++;
      return n;
    },
    (ds) => {
      let n = 0;
      for (const d of ds) if (checkTagged(d) === true) n++;
      return n;
    },
  ];
  for (const [i, f] of cases.entries()) {
    const accepted = f(docs);
    if (accepted !== docs.length) throw new Error(`${CASES[i]} refuses ${docs.length - accepted} of the ${docs.length} documents of ${set.name}`);
  }
  const bad = structuredClone(docs[0]);
  if ("sessionId" in bad) bad.sessionId = 7;
  else bad.jsonrpc = "1.0";
  for (const [i, f] of cases.entries()) if (f([bad]) !== 0) throw new Error(`${CASES[i]} accepts a broken copy of the first document of ${set.name}`);
  return { name: set.name, docs, bytes: set.docs.reduce((n, t) => n + Buffer.byteLength(t), 0), cases };
}

/** Median and 10th percentile, ns per document, of round-robin batches of about 2 ms. */
function timings(s) {
  const n = s.cases.length;
  let slowest = 0;
  for (const f of s.cases) {
    let iters = 0;
    const t = performance.now();
    while (performance.now() - t < 200) {
      f(s.docs);
      iters++;
    }
    slowest = Math.max(slowest, (performance.now() - t) / iters);
  }
  const iters = Math.max(1, Math.ceil(2 / slowest));
  const rounds = Math.max(21, Math.floor((seconds * 1000) / (2 * n)));
  const samples = s.cases.map(() => []);
  let sink = 0;
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < n; k++) {
      const c = (round + k) % n;
      const f = s.cases[c];
      const t = performance.now();
      for (let i = 0; i < iters; i++) sink += f(s.docs);
      samples[c].push(((performance.now() - t) * 1e6) / (iters * s.docs.length));
    }
  }
  if (sink === -1) console.log(sink);
  return samples.map((v) => {
    v.sort((a, b) => a - b);
    return [v[v.length >> 1], v[Math.floor(v.length / 10)]];
  });
}

function fmt(ns) {
  return ns >= 1e6 ? `${(ns / 1e6).toFixed(3)} ms` : ns >= 1e3 ? `${(ns / 1e3).toFixed(3)} µs` : `${ns.toFixed(1)} ns`;
}

const sets = corpus.sets.map(prepare);
console.log(`node ${process.version}, ajv ${ajvVersion}; ${seconds} s per set; ns per document, median (p10)`);
console.log(
  "| set | docs | bytes | generated `isValid` | generated `validate` | ajv | ajv, `discriminator: true` | ajv / isValid (target >= 1) | ajv / validate | ajv discriminator / isValid |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const s of sets) {
  const [a, b, c, d] = timings(s);
  const r = c[0] / a[0];
  console.log(
    `| ${s.name} | ${s.docs.length} | ${s.bytes} | ${fmt(a[0])} (${fmt(a[1])}) | ${fmt(b[0])} (${fmt(b[1])}) | ${fmt(c[0])} (${fmt(c[1])}) | ${fmt(d[0])} (${fmt(d[1])}) | ${r.toFixed(2)}× (${(c[1] / a[1]).toFixed(2)}×) ${r >= 1 ? "met" : "MISSED"} | ${(c[0] / b[0]).toFixed(2)}× | ${(d[0] / a[0]).toFixed(2)}× (${(d[1] / a[1]).toFixed(2)}×) |`,
  );
}
