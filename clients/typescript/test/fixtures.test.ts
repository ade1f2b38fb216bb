/**
 * The TypeScript emitter on the generator's fixture schemas (`codegen/tests/fixtures/`, one
 * feature each): the output compiles under `--strict`, and its fast and explaining validators
 * agree on generated documents; compiled patterns agree with `RegExp`.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";

import { PKG, ROOT, compileGenerated, rng } from "./helpers.js";

const CODEGEN = process.env.OPENAGENTS_CODEGEN_BIN ?? join(ROOT, "target/debug/openagents-codegen");
const FIXTURES = join(ROOT, "codegen/tests/fixtures");
const WORK = join(PKG, "build/fixtures");

interface Generated {
  TYPES: readonly { name: string }[];
  isValid(name: string, value: unknown, lenient?: boolean): boolean;
  validate(name: string, value: unknown, lenient?: boolean): { pointer: string; keyword: string }[];
}

const SCALARS: unknown[] = [null, true, false, 0, 1, 2, 2.0, 2.5, -1, 11, 1e300, "", "a", "x1", "é😀", "\n", "9", [], [1], [{}], {}];

function randomValue(next: () => number, keys: string[], depth: number): unknown {
  const r = next();
  if (depth > 2 || r < 0.5) return SCALARS[Math.floor(next() * SCALARS.length)];
  if (r < 0.6) return Array.from({ length: Math.floor(next() * 3) }, () => randomValue(next, keys, depth + 1));
  const o: Record<string, unknown> = {};
  for (const k of keys) if (next() < 0.6) o[k] = randomValue(next, keys, depth + 1);
  return o;
}

test("the emitter's output for every fixture schema compiles strictly and validates consistently", { skip: !existsSync(CODEGEN) && `${CODEGEN} is missing` }, async () => {
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  const names = readdirSync(FIXTURES).filter((f) => f.endsWith(".json")).map((f) => f.slice(0, -5)).sort();
  assert.ok(names.length > 5, "fixture schemas");
  const keysByFixture = new Map<string, string[]>();
  for (const name of names) {
    const dir = join(WORK, name);
    mkdirSync(join(dir, "schema"), { recursive: true });
    copyFileSync(join(FIXTURES, `${name}.json`), join(dir, "schema", `${name}.json`));
    const out = spawnSync(CODEGEN, ["typescript", "--schema", join(dir, "schema"), "--out-dir", join(dir, "src/generated"), "--runtime", "../rt.js"], { encoding: "utf8" });
    assert.equal(out.status, 0, `${name}: ${out.stderr}`);
    copyFileSync(join(PKG, "src/rt.ts"), join(dir, "src/rt.ts"));
    // Error classes need nothing beside them: errors.ts declares its base classes, named from the schema.
    // Property names to build documents from: every quoted word in the schema.
    const text = readdirSync(join(dir, "schema")).map((f) => spawnSync("cat", [join(dir, "schema", f)], { encoding: "utf8" }).stdout).join("");
    keysByFixture.set(name, [...new Set([...text.matchAll(/"([a-z_][a-z_0-9]*)"\s*:/gi)].map((m) => m[1]!))]);
  }
  compileGenerated(WORK, "the generated fixtures");
  let checked = 0;
  for (const name of names) {
    const mod = (await import(pathToFileURL(join(WORK, "out", name, "src/generated/validators.js")).href)) as Generated;
    const next = rng(name.length * 7919);
    const keys = keysByFixture.get(name)!;
    for (const t of mod.TYPES) {
      for (let i = 0; i < 300; i++) {
        const doc = randomValue(next, keys, 0);
        for (const lenient of [false, true]) {
          const fast = mod.isValid(t.name, doc, lenient);
          const violations = mod.validate(t.name, doc, lenient);
          assert.equal(fast, violations.length === 0, `${name}/${t.name} on ${JSON.stringify(doc)}: ${JSON.stringify(violations)}`);
          checked++;
        }
      }
    }
  }
  assert.ok(checked > 1000, `${checked} checks`);
});

test("compiled and RegExp patterns agree on the pattern fixture", { skip: !existsSync(CODEGEN) && `${CODEGEN} is missing` }, async () => {
  assert.ok(existsSync(join(WORK, "out/pattern")), "the previous test compiles the fixtures");
  const mod = (await import(pathToFileURL(join(WORK, "out/pattern/src/generated/validators.js")).href)) as Generated;
  const patterns: [string, string][] = [
    ["id", "^[A-Za-z0-9][A-Za-z0-9._:-]*$"],
    ["contains_digit", "\\d"],
    ["word", "^\\p{Letter}+$"],
  ];
  const alphabet = ["a", "Z", "0", "7", ".", "-", ":", " ", "\n", "é", "中", "😀", "\ud800", "\udc00", "_", "ß"];
  const next = rng(99);
  for (let i = 0; i < 5000; i++) {
    let s = "";
    for (let n = Math.floor(next() * 6); n > 0; n--) s += alphabet[Math.floor(next() * alphabet.length)];
    for (const [field, source] of patterns) {
      const ours = mod.validate("Pattern", { [field]: s }).every((v) => v.keyword !== "pattern");
      assert.equal(ours, new RegExp(source, "u").test(s), `${source} on ${JSON.stringify(s)}`);
    }
  }
});
