/**
 * The shared golden vectors (`tests/vectors/*.json` and `large/`), through the generated
 * validators, checked against three references that must all agree with every case:
 *
 * - the case itself: valid, or invalid with a violation at its `pointer` for its `keyword`;
 * - the Rust validators, through the real `openagents validate` (same verdict, same pointers);
 * - `ajv` (draft 2020-12) on the bundle `openagents schema` prints, with `"$ref"` set to each
 *   type's pointer from the generated `TYPES` list (same verdict).
 */

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { Ajv2020 } from "ajv/dist/2020.js";
import type { ValidateFunction } from "ajv/dist/2020.js";

import { isValid, TYPES, validate } from "@openagents/client";
import type { TypeName } from "@openagents/client";

import { BIN, ROOT } from "./helpers.js";

interface Case {
  file: string;
  type: TypeName;
  description: string;
  document: unknown;
  expect: { valid: true } | { valid: false; pointer: string; keyword: string };
}

interface Fill {
  at: string;
  repeat: unknown;
  times: number;
  prefix?: string;
  suffix?: string;
}

/** Puts the value a `fill` describes at its pointer. */
function applyFill(doc: unknown, fill: Fill): unknown {
  const built = typeof fill.repeat === "string" ? (fill.prefix ?? "") + fill.repeat.repeat(fill.times) + (fill.suffix ?? "") : Array.from({ length: fill.times }, () => structuredClone(fill.repeat));
  if (fill.at === "") return built;
  const tokens = fill.at.slice(1).split("/").map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
  let node = doc as Record<string, unknown>;
  for (const t of tokens.slice(0, -1)) node = node[t] as Record<string, unknown>;
  const last = tokens[tokens.length - 1]!;
  assert.ok(last in node, `fill target ${fill.at} is not in the document`);
  node[last] = built;
  return doc;
}

function loadCases(dir: string, large: boolean): Case[] {
  const cases: Case[] = [];
  for (const name of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
    const file = join(dir, name);
    const root = JSON.parse(readFileSync(file, "utf8")) as { type: string; valid: Record<string, unknown>[]; invalid: Record<string, unknown>[] };
    assert.equal(name, `${root.type}.json`, `${file}: a vector file is named after its type`);
    assert.ok(TYPES.some((t) => t.name === root.type), `${file}: no generated type is named ${root.type}`);
    for (const [list, valid] of [[root.valid, true], [root.invalid, false]] as const) {
      for (const c of list) {
        let document = c.document;
        if (large) {
          assert.ok(c.fill, `${file}: a large case needs a fill`);
          document = applyFill(document, c.fill as Fill);
        }
        cases.push({
          file: `${large ? "large/" : ""}${name}`,
          type: root.type as TypeName,
          description: String(c.description),
          document,
          expect: valid ? { valid: true } : { valid: false, pointer: String(c.pointer), keyword: String(c.keyword) },
        });
      }
    }
  }
  return cases;
}

/** The reference validators: the bundle with `$ref` at each type's pointer, compiled by ajv. */
function ajvValidators(): Map<string, ValidateFunction> {
  const out = spawnSync(BIN, ["schema"], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  assert.equal(out.status, 0, out.stderr);
  const bundle = JSON.parse(out.stdout) as Record<string, unknown>;
  const ajv = new Ajv2020({ strict: true, strictTypes: false, allowUnionTypes: true, allErrors: false, validateSchema: true });
  ajv.addVocabulary(["x-constants", "x-enum", "x-extensible", "x-result", "x-openrpc", "x-echoed"]);
  const map = new Map<string, ValidateFunction>();
  for (const t of TYPES) map.set(t.name, ajv.compile({ ...structuredClone(bundle), $ref: t.pointer }));
  return map;
}

/** The Rust verdict: `openagents validate TYPE -`, its exit code and the pointers it names. */
function rustVerdict(type: string, document: unknown): Promise<{ code: number | null; pointers: string[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, ["validate", type, "-"], { stdio: ["pipe", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (s: string) => (stderr += s));
    child.on("error", reject);
    child.on("close", (code) => {
      const pointers = stderr
        .split("\n")
        .filter((l) => l.length > 0)
        .map((l) => l.slice(0, l.indexOf(": ")))
        .map((p) => (p === "(root)" ? "" : p))
        .sort();
      resolve({ code, pointers, stderr });
    });
    child.stdin.end(JSON.stringify(document));
  });
}

/** Runs `f` over `items`, `width` at a time. */
async function pool<T, R>(items: T[], width: number, f: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await f(items[i]!);
      }
    }),
  );
  return out;
}

function show(doc: unknown): string {
  const s = JSON.stringify(doc);
  return s.length > 200 ? `${s.slice(0, 200)}… (${s.length} chars)` : s;
}

async function checkAll(cases: Case[]): Promise<void> {
  const ajv = ajvValidators();
  const rust = await pool(cases, 4, (c) => rustVerdict(c.type, c.document));
  const failures: string[] = [];
  cases.forEach((c, i) => {
    const problems: string[] = [];
    const fast = isValid(c.type, c.document);
    const violations = validate(c.type, c.document);
    const reference = ajv.get(c.type)!(c.document);
    const r = rust[i]!;
    const ours = violations.map((v) => v.pointer).sort();
    if (c.expect.valid) {
      if (!fast) problems.push("the fast validator refuses a valid document");
      if (violations.length > 0) problems.push(`the explaining validator refuses a valid document: ${JSON.stringify(violations)}`);
      if (!reference) problems.push("ajv refuses a valid document");
      if (r.code !== 0) problems.push(`openagents validate refuses a valid document: ${r.stderr}`);
    } else {
      const { pointer, keyword } = c.expect;
      if (fast) problems.push("the fast validator accepts an invalid document");
      if (!violations.some((v) => v.pointer === pointer && v.keyword === keyword)) problems.push(`no ${keyword} violation at ${JSON.stringify(pointer)}: ${JSON.stringify(violations)}`);
      if (reference) problems.push("ajv accepts an invalid document");
      if (r.code !== 1) problems.push(`openagents validate exits ${r.code}: ${r.stderr}`);
      else if (JSON.stringify(r.pointers) !== JSON.stringify(ours)) problems.push(`the Rust validator names ${JSON.stringify(r.pointers)}, ours ${JSON.stringify(ours)}`);
    }
    if (problems.length > 0) failures.push(`${c.type} [${c.file}] ${JSON.stringify(c.description)}\n    ${problems.join("\n    ")}\n    document: ${show(c.document)}`);
  });
  assert.equal(failures.length, 0, `${failures.length} of ${cases.length} case(s) disagree:\n\n${failures.join("\n\n")}`);
}

test("golden vectors agree with the case, the Rust validators and ajv", async () => {
  const cases = loadCases(join(ROOT, "tests/vectors"), false);
  assert.ok(cases.length > 100, `only ${cases.length} cases`);
  await checkAll(cases);
});

test("large vectors (filled) agree with the case, the Rust validators and ajv", async () => {
  const cases = loadCases(join(ROOT, "tests/vectors/large"), true);
  const task = (len: number, valid: boolean): boolean =>
    cases.some((c) => {
      const t = (c.document as { task?: unknown }).task;
      return c.type === "Turn" && typeof t === "string" && Array.from(t).length === len && t.length > len && c.expect.valid === valid;
    });
  assert.ok(task(98304, true), "large/Turn.json lost its valid task of exactly 98304 code points beyond the BMP");
  assert.ok(task(98305, false), "large/Turn.json lost its invalid task of 98305 code points");
  await checkAll(cases);
});

test("every type the binary knows is generated, and the reverse", () => {
  const out = spawnSync(BIN, ["types"], { encoding: "utf8" });
  const names = out.stdout
    .split("\n")
    .filter((l) => l.length > 0)
    .map((l) => l.split(/\s+/)[0]!)
    .sort();
  assert.deepEqual(TYPES.map((t) => t.name).sort(), names);
  const roots = out.stdout.split("\n").filter((l) => l.includes("(root)")).map((l) => l.split(/\s+/)[0]);
  assert.deepEqual(TYPES.filter((t) => t.root).map((t) => t.name).sort(), roots.sort());
});
