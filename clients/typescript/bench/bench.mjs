#!/usr/bin/env node
// Benchmarks (not a test): the TypeScript client against the plain alternatives a user would
// pick, side by side in one run, with ratios.
//
//   1. `status` calls per second over HTTP: `client.status()` (params check, fetch, envelope and
//      result validation, typed errors) against raw `fetch` posting the same JSON and parsing the
//      response — sequentially, and with 8 calls in flight.
//   2. Validation: the generated validators (`isValid`, the fast path) against ajv's compiled
//      validators (draft 2020-12, on the bundle `openagents schema` prints, `$ref` to each type),
//      on the same documents: every valid golden vector, every invalid one, and a `Turn` whose
//      task is 98304 emoji (code points counted).
//
//   node bench/bench.mjs            (after `npm run build`; binary: $OPENAGENTS_BIN, else
//                                    target/release/openagents, else target/debug/openagents)
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { Ajv2020 } from "ajv/dist/2020.js";

import { isValid, OpenAgentsClient, TYPES, VERSION } from "@openagents/client";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const bin =
  process.env.OPENAGENTS_BIN ?? [join(root, "target/release/openagents"), join(root, "target/debug/openagents")].find((p) => existsSync(p)) ?? "openagents";
const echo = [join(root, "target/release/openagents-runner-echo"), join(root, "target/debug/openagents-runner-echo")].find((p) => existsSync(p));

/** Runs `f` for about `ms` milliseconds in batches; answers operations per second. */
async function rate(f, ms) {
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    n += await f();
    now = performance.now();
  }
  return (n * 1000) / (now - start);
}

function fmt(x) {
  return x >= 1e6 ? `${(x / 1e6).toFixed(2)} M` : x >= 1e3 ? `${(x / 1e3).toFixed(1)} k` : x.toFixed(0);
}

// ---------------------------------------------------------------------------------------------
// 1. status over HTTP
// ---------------------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), "openagents-ts-bench-"));
writeFileSync(join(dir, "config.toml"), "[capabilities.server]\nenabled = true\n");
writeFileSync(join(dir, "runners.toml"), `[runners.echo]\ncommand = ${JSON.stringify(echo ?? "/bin/false")}\n`);
const env = { ...process.env, OPENAGENTS_CONFIG: join(dir, "config.toml"), OPENAGENTS_RUNNERS: join(dir, "runners.toml"), XDG_RUNTIME_DIR: dir };
const server = spawn(bin, ["serve", "--http", "--runner", "echo"], { env, cwd: dir, stdio: ["ignore", "pipe", "inherit"] });
const ready = JSON.parse(await new Promise((resolve) => createInterface({ input: server.stdout }).once("line", resolve)));
const token = readFileSync(ready.token_file, "utf8").trim();
const client = OpenAgentsClient.http({ url: ready.url, token });
const rpc = new URL("rpc", ready.url);
let id = 0;
async function rawStatus() {
  const res = await fetch(rpc, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ id: ++id, method: "status" }),
  });
  const body = JSON.parse(await res.text());
  if (body.result === undefined) throw new Error("status failed");
  return body.result;
}
const sequential = (f) => async () => {
  for (let i = 0; i < 50; i++) await f();
  return 50;
};
const inFlight = (f, width) => async () => {
  await Promise.all(Array.from({ length: width }, async () => {
    for (let i = 0; i < 25; i++) await f();
  }));
  return width * 25;
};
const typed = () => client.status();
console.log(`openagents: ${bin}`);
console.log(`node ${process.version}, ${(await import("node:os")).cpus().length} cores`);
await rate(sequential(typed), 1000);
await rate(sequential(rawStatus), 1000);
const rounds = 7;
const results = { seqTs: [], seqRaw: [], parTs: [], parRaw: [] };
for (let r = 0; r < rounds; r++) {
  // Interleaved, the order swapped every round, so load from elsewhere hits both alike.
  const pairs = [
    [results.seqRaw, sequential(rawStatus), results.seqTs, sequential(typed)],
    [results.parRaw, inFlight(rawStatus, 8), results.parTs, inFlight(typed, 8)],
  ];
  for (const [ra, fa, rb, fb] of pairs) {
    if (r % 2 === 0) {
      ra.push(await rate(fa, 1000));
      rb.push(await rate(fb, 1000));
    } else {
      rb.push(await rate(fb, 1000));
      ra.push(await rate(fa, 1000));
    }
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
await client.shutdown().catch(() => undefined);
await new Promise((r) => (server.exitCode !== null ? r() : server.once("exit", r)));
rmSync(dir, { recursive: true, force: true });

console.log(`\n\`status\` over HTTP, calls/s (median of ${rounds} interleaved 1 s rounds)`);
console.log("| calls | TS client | raw fetch | client / raw |");
console.log("|---|---:|---:|---:|");
for (const [name, ts, raw] of [["sequential", results.seqTs, results.seqRaw], ["8 in flight", results.parTs, results.parRaw]]) {
  console.log(`| ${name} | ${fmt(median(ts))} | ${fmt(median(raw))} | ${(median(ts) / median(raw)).toFixed(2)} |`);
}

// ---------------------------------------------------------------------------------------------
// 2. validation
// ---------------------------------------------------------------------------------------------

const bundle = JSON.parse(spawnSync(bin, ["schema"], { encoding: "utf8", maxBuffer: 1 << 26 }).stdout);
const ajv = new Ajv2020({ strict: true, strictTypes: false, allowUnionTypes: true });
ajv.addVocabulary(["x-constants", "x-enum", "x-extensible", "x-result", "x-openrpc", "x-echoed"]);
const compiled = new Map(TYPES.map((t) => [t.name, ajv.compile({ ...structuredClone(bundle), $ref: t.pointer })]));
const vectors = join(root, "tests/vectors");
const valid = [];
const invalid = [];
for (const f of readdirSync(vectors).filter((f) => f.endsWith(".json"))) {
  const v = JSON.parse(readFileSync(join(vectors, f), "utf8"));
  for (const c of v.valid) valid.push([v.type, c.document]);
  for (const c of v.invalid) invalid.push([v.type, c.document]);
}
const bigTurn = [["Turn", { schema: VERSION, assignment: "a1", conversation: "c1", agent: { runner: "echo" }, task: "😀".repeat(98304), cwd: "/tmp" }]];
const smallTurn = [["Turn", { schema: VERSION, assignment: "asg-0001", conversation: "conv-0001", agent: { runner: "echo" }, task: "Summarise the open issues.", cwd: "/home/user/project" }]];
// Both must agree before anything is timed.
for (const [set, expected] of [[valid, true], [invalid, false], [bigTurn, true], [smallTurn, true]]) {
  for (const [type, doc] of set) {
    if (isValid(type, doc) !== expected || compiled.get(type)(doc) !== expected) throw new Error(`disagreement on a ${type} document`);
  }
}
// Each batch covers the set at least once and at least ~2000 documents, so the timer and the
// batch loop cost nothing measurable.
let sink = 0;
const ours = (set) => () => {
  const reps = Math.max(1, Math.ceil(2000 / set.length));
  for (let r = 0; r < reps; r++) for (const [type, doc] of set) if (isValid(type, doc)) sink++;
  return reps * set.length;
};
const theirs = (set) => () => {
  const reps = Math.max(1, Math.ceil(2000 / set.length));
  for (let r = 0; r < reps; r++) for (const [type, doc] of set) if (compiled.get(type)(doc)) sink++;
  return reps * set.length;
};
console.log("\nValidation, documents/s (median of 5 interleaved 0.5 s rounds)");
console.log("| documents | generated `isValid` | ajv compiled | generated / ajv |");
console.log("|---|---:|---:|---:|");
const cases = [
  ["one small valid `Turn` (179 bytes)", smallTurn],
  [`${valid.length} valid vectors, all ${TYPES.length} types`, valid],
  [`${invalid.length} invalid vectors`, invalid],
  ["a `Turn` whose task is 98304 emoji", bigTurn],
];
for (const [name, set] of cases) {
  const a = [];
  const b = [];
  for (let r = 0; r < 5; r++) {
    a.push(await rate(async () => ours(set)(), 500));
    b.push(await rate(async () => theirs(set)(), 500));
  }
  console.log(`| ${name} | ${fmt(median(a))} | ${fmt(median(b))} | ${(median(a) / median(b)).toFixed(2)} |`);
}
if (sink < 0) console.log(sink);
