/**
 * The generated validators on values `JSON.parse` never makes but a caller can build: `NaN` and
 * the infinities (not JSON numbers: refused wherever a number is checked), values nested deeper
 * than a document may (refused with a violation at the limit the Rust runtime reads with, never
 * a stack overflow), and objects with inherited or prototype-less members (a declared property is
 * read as the object gives it, own or inherited; any other member is an own enumerable property,
 * as `Object.keys` lists them). In every
 * case the fast check (`isValid`) and the explaining one (`validate`) agree, and neither throws.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { before, test } from "node:test";

import { compileGenerated, rng } from "./helpers.js";

/** `clients/typescript/` (tests run from `build/test/`). */
const PKG = resolve(fileURLToPath(new URL("../../", import.meta.url)));
const ROOT = resolve(PKG, "../..");
const CODEGEN = process.env.OPENAGENTS_CODEGEN_BIN ?? join(ROOT, "target/debug/openagents-codegen");
const FIXTURES = join(ROOT, "codegen/tests/fixtures");
const WORK = join(PKG, "build/validator-edges");
const SKIP = !existsSync(CODEGEN) && `${CODEGEN} is missing`;

/** The deepest arrays and objects may nest: the Rust runtime reads 127 levels and refuses the 128th. */
const LIMIT = 127;

const SCHEMA = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "edges.json",
  title: "Edges",
  type: "object",
  properties: { tree: { $ref: "#/$defs/Tree" } },
  $defs: {
    Pct: { type: "number", minimum: 0, maximum: 100 },
    Dbl: { type: "number" },
    Count: { type: "integer", minimum: 0 },
    NumOrText: { type: ["number", "string"] },
    MaybeInt: { type: ["integer", "null"] },
    Bounded: { minimum: 0, maximum: 10 },
    Choice: { enum: [1, 2.5, "x"] },
    Fixed: { const: 3 },
    Reading: {
      type: "object",
      required: ["value"],
      properties: { value: { type: "number" }, samples: { type: "array", items: { type: "number", exclusiveMinimum: -1 } } },
      additionalProperties: { type: "number" },
    },
    Tree: { type: "object", additionalProperties: false, properties: { children: { type: "array", items: { $ref: "#/$defs/Tree" } } } },
    Nest: { type: "array", items: { $ref: "#/$defs/Nest" } },
    Expr: {
      oneOf: [
        { title: "Num", type: "object", additionalProperties: false, required: ["kind", "value"], properties: { kind: { const: "num" }, value: { type: "number" } } },
        { title: "Neg", type: "object", additionalProperties: false, required: ["kind", "arg"], properties: { kind: { const: "neg" }, arg: { $ref: "#/$defs/Expr" } } },
      ],
    },
    Closed: { type: "object", additionalProperties: false, properties: { a: { type: "integer" } } },
    Empty: { type: "object", additionalProperties: false },
    Needs: { type: "object", required: ["a"], properties: { a: { type: "integer" } } },
  },
};

interface Violation {
  pointer: string;
  keyword: string;
  message: string;
}

interface Generated {
  TYPES: readonly { name: string }[];
  isValid(name: string, value: unknown, lenient?: boolean): boolean;
  validate(name: string, value: unknown, lenient?: boolean): Violation[];
}

/** The generated validators of each schema, by module name (`edges`, and one per fixture). */
const modules = new Map<string, Generated>();

before(async () => {
  if (SKIP) return;
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  const schemas: [string, string][] = [["edges", JSON.stringify(SCHEMA, null, 2)]];
  for (const f of readdirSync(FIXTURES).filter((f) => f.endsWith(".json")).sort()) {
    schemas.push([f.slice(0, -5), readFileSync(join(FIXTURES, f), "utf8")]);
  }
  for (const [name, text] of schemas) {
    const dir = join(WORK, name);
    mkdirSync(join(dir, "schema"), { recursive: true });
    writeFileSync(join(dir, "schema", `${name}.json`), text);
    const out = spawnSync(CODEGEN, ["typescript", "--schema", join(dir, "schema"), "--out-dir", join(dir, "src/generated"), "--runtime", "../rt.js"], { encoding: "utf8" });
    assert.equal(out.status, 0, `${name}: ${out.stderr}`);
    copyFileSync(join(PKG, "src/rt.ts"), join(dir, "src/rt.ts"));
  }
  compileGenerated(WORK, "the generated validators");
  for (const [name] of schemas) {
    modules.set(name, (await import(pathToFileURL(join(WORK, "out", name, "src/generated/validators.js")).href)) as Generated);
  }
});

function edges(): Generated {
  const m = modules.get("edges");
  assert.ok(m, "the generated edges module");
  return m;
}

/** Both checks of `value` as `type`: they must agree, and neither may throw. Answers the violations. */
function check(m: Generated, type: string, value: unknown, what: string): Violation[] {
  const fast = m.isValid(type, value);
  const found = m.validate(type, value);
  assert.equal(fast, found.length === 0, `${what}: isValid says ${fast}, validate says ${JSON.stringify(found)}`);
  assert.ok(!found.some((v) => v.message.includes("disagree")), `${what}: ${JSON.stringify(found)}`);
  return found;
}

test("NaN and the infinities are refused wherever a number is checked", { skip: SKIP }, () => {
  const m = edges();
  const cases: [string, unknown, string, string][] = [
    // type, value, pointer, keyword
    ["Pct", NaN, "", "type"],
    ["Pct", Infinity, "", "type"],
    ["Dbl", Infinity, "", "type"],
    ["Dbl", -Infinity, "", "type"],
    ["Dbl", NaN, "", "type"],
    ["Count", Infinity, "", "type"],
    ["Count", NaN, "", "type"],
    ["NumOrText", NaN, "", "type"],
    ["MaybeInt", -Infinity, "", "type"],
    ["Bounded", NaN, "", "type"],
    ["Bounded", -Infinity, "", "type"],
    ["Choice", NaN, "", "enum"],
    ["Fixed", Infinity, "", "const"],
    ["Reading", { value: NaN }, "/value", "type"],
    ["Reading", { value: 1, samples: [1, Infinity] }, "/samples/1", "type"],
    ["Reading", { value: 1, extra: -Infinity }, "/extra", "type"],
  ];
  for (const [type, value, pointer, keyword] of cases) {
    const what = `${type} ${String(value)} ${JSON.stringify(value)}`;
    const found = check(m, type, value, what);
    assert.equal(found.length, 1, `${what}: ${JSON.stringify(found)}`);
    const [v] = found;
    assert.equal(v!.pointer, pointer, what);
    assert.equal(v!.keyword, keyword, what);
    if (keyword === "type") assert.match(v!.message, /finite number/, what);
    // The value is named as it is, not as `JSON.stringify` writes it (`null`).
    assert.match(v!.message, /NaN|Infinity/, what);
  }
  // Finite numbers, and what the bounds of an untyped schema do not constrain, are still valid.
  for (const [type, value] of [["Pct", 0], ["Pct", 100], ["Dbl", 1e308], ["Dbl", -0], ["Count", 2 ** 60], ["NumOrText", "NaN"], ["MaybeInt", null], ["Bounded", 10], ["Bounded", "text"], ["Choice", 2.5], ["Fixed", 3], ["Reading", { value: -1e-300, samples: [0], extra: 5 }]] as [string, unknown][]) {
    assert.deepEqual(check(m, type, value, `${type} ${JSON.stringify(value)}`), [], `${type} ${JSON.stringify(value)}`);
  }
});

/** A `Tree` whose every node has one child, `n` nodes deep, built without recursion. */
function tree(n: number): unknown {
  let t: unknown = {};
  for (let i = 1; i < n; i++) t = { children: [t] };
  return t;
}

/** The deepest arrays and objects nest in a value, as its JSON text shows. */
function nesting(value: unknown): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  const text = JSON.stringify(value);
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "[" || c === "{") max = Math.max(max, ++depth);
    else if (c === "]" || c === "}") depth--;
  }
  return max;
}

test("a value nested 100000 deep gives a violation, not a stack overflow", { skip: SKIP }, () => {
  const m = edges();
  let nest: unknown = [];
  for (let i = 0; i < 100_000; i++) nest = [nest];
  let expr: unknown = { kind: "num", value: 1 };
  for (let i = 0; i < 100_000; i++) expr = { kind: "neg", arg: expr };
  // Invalid at the bottom too: the explaining check must stop at the limit as the fast one does.
  let bad: unknown = { children: [{ nope: true }] };
  for (let i = 0; i < 100_000; i++) bad = { children: [bad] };
  for (const [type, value] of [["Tree", tree(100_000)], ["Nest", nest], ["Expr", expr], ["Tree", bad], ["Edges", { tree: tree(100_000) }]] as [string, unknown][]) {
    const found = check(m, type, value, `${type} 100000 deep`);
    assert.equal(found.length, 1, `${type}: ${JSON.stringify(found).slice(0, 500)}`);
    assert.equal(found[0]!.keyword, "json", type);
    assert.match(found[0]!.message, /recursion limit exceeded/, type);
    // At the array or object one past the limit.
    assert.equal(found[0]!.pointer.split("/").length - 1, LIMIT, `${type}: ${found[0]!.pointer.slice(0, 80)}`);
  }
});

test("the nesting limit is the Rust runtime's: 127 levels of arrays and objects pass, 128 do not", { skip: SKIP }, () => {
  const m = edges();
  const deep = (type: string, value: unknown): void => {
    const levels = nesting(value);
    const found = check(m, type, value, `${type} ${levels} levels`);
    if (levels <= LIMIT) assert.deepEqual(found, [], `${type} nested ${levels} levels`);
    else assert.deepEqual(found.map((v) => v.keyword), ["json"], `${type} nested ${levels} levels`);
  };
  for (let n = 60; n <= 66; n++) {
    deep("Tree", tree(n));
    // A leaf with an empty array: one level more than the leaf `{}`.
    let t: unknown = { children: [] };
    for (let i = 1; i < n; i++) t = { children: [t] };
    deep("Tree", t);
    deep("Edges", { tree: tree(n) });
  }
  for (let n = 124; n <= 130; n++) {
    let nest: unknown = [];
    for (let i = 1; i < n; i++) nest = [nest];
    deep("Nest", nest);
    let expr: unknown = { kind: "num", value: 1 };
    for (let i = 1; i < n; i++) expr = { kind: "neg", arg: expr };
    deep("Expr", expr);
  }
});

test("a declared property is read as the object gives it; other members are own enumerable ones, in both checks", { skip: SKIP }, () => {
  const m = edges();
  // Undeclared inherited properties are not members: JSON has no prototypes.
  assert.deepEqual(check(m, "Closed", Object.create({ bad: 1 }), "Closed inheriting bad"), []);
  assert.deepEqual(check(m, "Closed", Object.assign(Object.create({ bad: 1 }), { a: 1 }), "Closed with a, inheriting bad"), []);
  assert.deepEqual(check(m, "Empty", Object.create({ bad: 1 }), "Empty inheriting bad"), []);
  assert.deepEqual(check(m, "Reading", Object.assign(Object.create({ extra: "text" }), { value: 1 }), "Reading inheriting extra"), []);
  // A declared property is read as the object gives it, own or inherited (a getter too): the
  // checks read fields by name, as the code that takes the value will.
  const wrong = check(m, "Closed", Object.create({ a: "not an integer" }), "Closed inheriting a");
  assert.deepEqual(wrong.map((v) => [v.pointer, v.keyword]), [["/a", "type"]]);
  assert.deepEqual(check(m, "Needs", Object.create({ a: 1 }), "Needs inheriting a"), []);
  assert.deepEqual(check(m, "Expr", Object.create({ kind: "num", value: 1 }), "Expr inheriting its tag"), []);
  class Getter {
    get a(): number {
      return 1;
    }
  }
  assert.deepEqual(check(m, "Needs", new Getter(), "Needs from a prototype getter"), []);
  class Fields {
    a = 1;
  }
  assert.deepEqual(check(m, "Needs", new Fields(), "Needs from a class instance"), []);
  assert.deepEqual(check(m, "Closed", new Fields(), "Closed from a class instance"), []);
  assert.deepEqual(check(m, "Expr", Object.assign(new Fields(), { kind: "neg", arg: { kind: "num", value: 2 } }) as unknown, "Expr from a class instance").map((v) => v.pointer), ["/a"]);
  // Own members of an object with no prototype, or with a prototype, are read as any others.
  const bare = Object.assign(Object.create(null) as Record<string, unknown>, { a: "x", b: 2 });
  assert.deepEqual(check(m, "Closed", bare, "Closed with no prototype").map((v) => [v.pointer, v.keyword]), [["/a", "type"], ["/b", "additionalProperties"]]);
  const own = Object.assign(Object.create({ a: 1 }), { a: "x" });
  assert.deepEqual(check(m, "Needs", own, "Needs with a shadowing own a").map((v) => [v.pointer, v.keyword]), [["/a", "type"]]);
  // Non-enumerable own properties are not members either (`Object.keys` skips them).
  const hidden = Object.defineProperty({ a: 1 }, "b", { value: 2, enumerable: false });
  assert.deepEqual(check(m, "Closed", hidden, "Closed with a non-enumerable b"), []);
  // A `__proto__` key `JSON.parse` makes is an own member like any other.
  assert.deepEqual(check(m, "Closed", JSON.parse('{"__proto__": {"a": 1}}'), "Closed with __proto__").map((v) => [v.pointer, v.keyword]), [["/__proto__", "additionalProperties"]]);
});

test("an enumerable property added to Object.prototype is not a member of every object", { skip: SKIP }, () => {
  const m = edges();
  const proto = Object.prototype as Record<string, unknown>;
  proto.polluted = "x";
  try {
    assert.deepEqual(check(m, "Closed", { a: 1 }, "Closed under pollution"), []);
    assert.deepEqual(check(m, "Empty", {}, "Empty under pollution"), []);
    assert.deepEqual(check(m, "Reading", { value: 1 }, "Reading under pollution"), []);
    assert.deepEqual(check(m, "Tree", JSON.parse('{"children": [{}, {"children": []}]}'), "Tree under pollution"), []);
  } finally {
    delete proto.polluted;
  }
});


const SCALARS: unknown[] = [null, true, 0, 1, 2.5, -1, 1e300, NaN, Infinity, -Infinity, "", "a", "x1", "circle", "num", "neg", [], {}];

/** A random value over `keys`: scalars (non-finite numbers among them), arrays, objects with or without a prototype of their own, and now and then a deep one. */
function randomValue(next: () => number, keys: string[], depth: number): unknown {
  const r = next();
  if (depth > 2 || r < 0.4) return SCALARS[Math.floor(next() * SCALARS.length)];
  if (r < 0.5) return Array.from({ length: Math.floor(next() * 3) }, () => randomValue(next, keys, depth + 1));
  if (r < 0.52) {
    // Deep: a chain through one key, 60 to 100 steps of one or two levels each.
    const key = keys[Math.floor(next() * keys.length)] ?? "a";
    let v: unknown = randomValue(next, keys, 3);
    const n = 60 + Math.floor(next() * 40);
    for (let i = 0; i < n; i++) {
      const r = next();
      v = r < 0.4 ? { [key]: [v] } : r < 0.8 ? { [key]: v } : { kind: "neg", arg: v };
    }
    return v;
  }
  const o: Record<string, unknown> = {};
  for (const k of keys) if (next() < 4 / keys.length) o[k] = randomValue(next, keys, depth + 1);
  const shape = next();
  if (shape < 0.15) {
    // Some members own, the rest inherited.
    const inherited: Record<string, unknown> = { [keys[Math.floor(next() * keys.length)] ?? "a"]: randomValue(next, keys, depth + 1) };
    for (const k of keys) if (next() < 2 / keys.length) inherited[k] = randomValue(next, keys, depth + 1);
    return Object.assign(Object.create(inherited) as object, o);
  }
  if (shape < 0.25) return Object.assign(Object.create(null) as object, o);
  return o;
}

/** Whether `v` holds an object whose prototype is neither `Object.prototype` nor `null`. */
function inherits(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(inherits);
  if (typeof v !== "object" || v === null) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return (proto !== Object.prototype && proto !== null) || Object.values(v).some(inherits);
}

/**
 * Random values through every type of every schema: the two checks agree and never throw, and a
 * value they accept with no inherited members is still accepted as the JSON document it stands
 * for (`JSON.stringify` writes non-finite numbers as `null`; it does not write inherited members,
 * which a declared property may be read from).
 */
test("on random values with NaN, infinities, deep nesting and inherited members, both checks agree and never throw", { skip: SKIP }, () => {
  let checked = 0;
  for (const [name, m] of modules) {
    const text = readFileSync(join(WORK, name, "schema", `${name}.json`), "utf8");
    const keys = [...new Set([...text.matchAll(/"([a-z_][a-z_0-9]*)"\s*:/gi)].map((x) => x[1]!))];
    const next = rng(name.length * 7919 + 17);
    for (const { name: type } of m.TYPES) {
      for (let i = 0; i < 300; i++) {
        const value = randomValue(next, keys, 0);
        for (const lenient of [false, true]) {
          let fast: boolean;
          let found: Violation[];
          try {
            fast = m.isValid(type, value, lenient);
            found = m.validate(type, value, lenient);
          } catch (e) {
            assert.fail(`${name}/${type}: threw ${String(e)}`);
          }
          if (fast !== (found.length === 0) || found.some((v) => v.message.includes("disagree"))) {
            assert.fail(`${name}/${type} (lenient ${lenient}): isValid ${fast}, validate ${JSON.stringify(found).slice(0, 300)}`);
          }
          if (fast && !inherits(value)) {
            const text = JSON.stringify(value);
            const again = m.validate(type, JSON.parse(text), lenient);
            if (again.length > 0) assert.fail(`${name}/${type}: accepted, but not as the JSON ${text.slice(0, 300)}: ${JSON.stringify(again).slice(0, 300)}`);
          }
          checked++;
        }
      }
    }
  }
  assert.ok(checked > 10_000, `checked ${checked}`);
});

test("uniqueItems: two elements equal as JSON values are a violation, in every form of array", { skip: SKIP }, () => {
  const m = modules.get("unique_items");
  assert.ok(m, "the generated unique_items module");
  const valid: [string, unknown][] = [
    ["Unique", { tags: ["a", "b"], scores: [1, 1.5], points: [{ x: 1 }, { x: 1, y: 2 }], kinds: ["a", "b"] }],
    ["Unique", { anything: [1, true, "1", [1], [true], { a: 1 }, { a: true }, null, 0, false, "", [], {}] }],
    ["Unique", { points: null, loose: ["a", "a"] }],
    ["Unique", { points: [{ x: 1, z: 1 }, { x: 1 }] }],
    // Lengths keep strings and names apart however they are cut.
    ["Unique", { anything: [{ ab: "c" }, { a: "bc" }, ["ab", "c"], ["a", "bc"]] }],
    ["Mixed", "aa"],
    ["Mixed", ["a", "b"]],
  ];
  for (const [type, value] of valid) {
    assert.deepEqual(check(m, type, value, `${type} ${JSON.stringify(value)}`), [], `${type} ${JSON.stringify(value)}`);
  }
  const repeated: [string, unknown, string][] = [
    ["Unique", { tags: ["a", "b", "a"] }, "/tags"],
    ["Unique", { scores: [1, 1.0] }, "/scores"],
    ["Unique", { scores: [0, -0] }, "/scores"],
    ["Unique", { points: [{ x: 1, y: 2 }, { y: 2, x: 1 }] }, "/points"],
    ["Unique", { kinds: ["b", "b"] }, "/kinds"],
    ["Unique", { anything: [{ a: [1, { b: null }] }, { a: [1, { b: null }] }] }, "/anything"],
    ["Mixed", ["a", 1, "a"], ""],
  ];
  for (const [type, value, pointer] of repeated) {
    const what = `${type} ${JSON.stringify(value)}`;
    const found = check(m, type, value, what);
    assert.deepEqual(found.map((v) => [v.pointer, v.keyword]), [[pointer, "uniqueItems"]], what);
    assert.match(found[0]!.message, /items \d+ and \d+ are equal/, what);
  }
  // A free-form element nested far deeper than a document may is compared without overflowing the stack.
  let deep: unknown = [];
  for (let i = 0; i < 100_000; i++) deep = [deep];
  check(m, "Unique", { anything: [deep, deep] }, "two deep elements");
});

test("types whose names differ only in case keep functions of their own", { skip: SKIP }, () => {
  // `A`'s inline property `bC` is the type `ABC` (an object), the `$defs` entry `ABC` the type
  // `Abc` (a string): one suffix each (`Abc`, `Abc2`), where both were `Abc` and did not compile.
  const m = modules.get("case_names");
  assert.ok(m, "the generated case_names module");
  assert.deepEqual(check(m, "CaseNames", { a: { bC: { x: "y" } }, abc: "xy" }, "both"), []);
  assert.deepEqual(check(m, "Abc", "x", "Abc").map((v) => v.keyword), ["minLength"]);
  assert.deepEqual(check(m, "ABC", { x: 1 }, "ABC").map((v) => [v.pointer, v.keyword]), [["/x", "type"]]);
  assert.deepEqual(check(m, "CaseNames", { a: { bC: { x: 1 } }, abc: "x" }, "both wrong").map((v) => v.pointer), ["/a/bC/x", "/abc"]);
});
