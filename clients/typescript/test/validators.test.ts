/**
 * The generated validators beyond the shared vectors: compiled patterns against `RegExp` with
 * the `u` flag on many strings, lengths in code points at the bound and one past it, lenient
 * reading of unknown kinds and values, and the fast and explaining checks agreeing.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  assertNever,
  codePoints,
  isKnownRuntimeEvent,
  isKnownRuntimeState,
  isRuntimeEvent,
  isServerEvent,
  isTurn,
  isValid,
  TYPES,
  validate,
  validateRuntimeStatus,
  validateServerEvent,
  validateTurn,
  VERSION,
} from "@openagents/client";
import type { RuntimeEvent, RuntimeState, ServerEvent, TypeName } from "@openagents/client";

import { rng } from "./helpers.js";


/** Characters that probe the patterns' classes: edges, newlines, NUL, non-ASCII, astral, lone surrogates. */
const ALPHABET = ["a", "Z", "0", "9", ".", "_", ":", "-", "/", " ", "\n", "\r", "\u0000", "\u2028", "é", "中", "😀", "\ud800", "\udc00", "$", "^", "A", "z"];

function randomString(next: () => number): string {
  const n = Math.floor(next() * 8);
  let s = "";
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(next() * ALPHABET.length)];
  return s;
}

const turn = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  schema: VERSION,
  assignment: "a1",
  conversation: "c1",
  agent: { runner: "echo" },
  task: "say hello",
  cwd: "/tmp",
  ...over,
});

test("compiled patterns agree with RegExp (u flag, unanchored) on 20000 strings", () => {
  // The schema's patterns, reached through the fields that use them.
  const cases: { pattern: string; check: (s: string) => boolean }[] = [
    { pattern: "^[A-Za-z0-9][A-Za-z0-9._:-]*$", check: (s) => validate("Id", s).every((v) => v.keyword !== "pattern") },
    { pattern: "^/[^\\u0000]*$", check: (s) => validateTurn(turn({ cwd: s })).every((v) => v.keyword !== "pattern") },
  ];
  const next = rng(42);
  for (const { pattern, check } of cases) {
    const re = new RegExp(pattern, "u");
    for (let i = 0; i < 10000; i++) {
      const s = randomString(next);
      assert.equal(check(s), re.test(s), `${pattern} on ${JSON.stringify(s)}`);
    }
  }
});

test("lengths count code points, not UTF-16 units", () => {
  const check = (task: string, valid: boolean): void => {
    assert.equal(isTurn(turn({ task })), valid, `task of ${codePoints(task)} code points, ${task.length} units`);
    const v = validateTurn(turn({ task }));
    assert.equal(v.length === 0, valid);
    if (!valid) assert.ok(v.some((x) => x.pointer === "/task" && x.keyword === "maxLength"));
  };
  check("😀".repeat(98304), true); // 196608 units
  check("😀".repeat(98305), false);
  check("aé€😀".repeat(24576), true);
  check("aé€😀".repeat(24576) + "é", false);
  check("x".repeat(98304), true);
  check("x".repeat(98305), false);
  // One code point, two units: at least one character long.
  check("😀", true);
  assert.ok(validateTurn(turn({ task: "" })).some((x) => x.pointer === "/task" && x.keyword === "minLength"));
  assert.equal(codePoints("a😀\ud800b"), 4, "a lone surrogate is one code point");
});

test("integers: 1.0 is one, 1.5 is not; bounds are inclusive", () => {
  const status = (seq: number): unknown => ({ seq, event: { type: "shutting_down" } });
  assert.equal(isServerEvent(status(1.0)), true);
  assert.deepEqual(
    validateServerEvent(status(1.5)).map((v) => [v.pointer, v.keyword]),
    [["/seq", "type"]],
  );
  assert.equal(isServerEvent(status(0)), true);
  assert.equal(isServerEvent(status(9007199254740991)), true);
  assert.deepEqual(
    validateServerEvent(status(-1)).map((v) => [v.pointer, v.keyword]),
    [["/seq", "minimum"]],
  );
});

test("null is not the same as a missing property", () => {
  const v = validateTurn(turn({ cwd: null }));
  assert.deepEqual(v.map((x) => [x.pointer, x.keyword]), [["/cwd", "type"]]);
  const { cwd: _, ...missing } = turn();
  assert.deepEqual(validateTurn(missing).map((x) => [x.pointer, x.keyword]), [["", "required"]]);
});

test("unknown kinds and values: refused strictly, kept when reading leniently", () => {
  const future = { seq: 7, time_ms: 1, event: { type: "turn_paused", reason: "lunch" } };
  assert.equal(isServerEvent(future), false);
  assert.deepEqual(validateServerEvent(future).map((x) => [x.pointer, x.keyword]), [["/event/type", "oneOf"]]);
  assert.equal(isServerEvent(future, true), true);
  assert.deepEqual(validateServerEvent(future, true), []);
  // A known kind is still checked fully when lenient.
  assert.equal(isServerEvent({ seq: 1, event: { type: "text" } }, true), false);
  // A missing or non-string tag is never a kind.
  assert.equal(isRuntimeEvent({ reason: "x" }, true), false);
  assert.equal(isRuntimeEvent({ type: 3 }, true), false);
  // An unknown enum value where the enum is extensible.
  const status = {
    state: "hibernating",
    active_turn: null,
    counters: { submitted: 0, completed: 0, failed: 0, interrupted: 0 },
    last_seq: 0,
    subscribers: 0,
    lease: null,
    schema_version: VERSION,
    limits: { max_frame: 1, max_output: 1, max_line_bytes: 1, event_channel_capacity: 1 },
    a_field_from_the_future: true,
  };
  assert.deepEqual(validateRuntimeStatus(status).map((x) => [x.pointer, x.keyword]), [["/state", "enum"]]);
  assert.deepEqual(validateRuntimeStatus(status, true), []);
  // Typed code handles the unknown member explicitly.
  const ev = future.event as RuntimeEvent;
  assert.equal(isKnownRuntimeEvent(ev), false);
  assert.equal(describe(ev), "a kind this version does not know: turn_paused");
  assert.equal(isKnownRuntimeState(status.state as RuntimeState), false);
});

/** An exhaustive `switch`: adding a kind to the schema makes this stop compiling. */
function describe(ev: RuntimeEvent): string {
  if (!isKnownRuntimeEvent(ev)) return `a kind this version does not know: ${ev.type}`;
  switch (ev.type) {
    case "turn_started":
      return `started ${ev.assignment}`;
    case "text":
      return ev.text;
    case "turn_completed":
      return `completed: ${ev.result}`;
    case "turn_failed":
      return `failed: ${ev.error.code}`;
    case "approval_requested":
    case "approval_resolved":
    case "approval_denied":
    case "lagged":
    case "gap":
    case "shutting_down":
      return ev.type;
    default:
      return assertNever(ev);
  }
}

test("describe handles every known kind", () => {
  const ev: ServerEvent = { seq: 1, event: { type: "text", text: "hi" } };
  assert.equal(describe(ev.event), "hi");
});

test("closed objects refuse unknown properties, at the property's pointer", () => {
  const v = validateTurn(turn({ agent: { runner: "echo", command: "/bin/sh" } }));
  assert.deepEqual(v.map((x) => [x.pointer, x.keyword]), [["/agent/command", "additionalProperties"]]);
  // A property name that Object.prototype also answers to is not mistaken for a present one.
  const { task: _, ...rest } = turn();
  assert.deepEqual(validateTurn({ ...rest, toString: "x" }).map((x) => [x.pointer, x.keyword]).sort(), [
    ["", "required"],
    ["/toString", "additionalProperties"],
  ]);
  const keys = validateTurn({ ...turn(), "a/b~c": 1 });
  assert.deepEqual(keys.map((x) => x.pointer), ["/a~1b~0c"]);
});

test("the fast and the explaining validator agree on mutated documents", () => {
  const next = rng(7);
  const samples: unknown[] = [null, true, 0, 1.5, -1, "", "x", [], {}, [1], { type: "text" }, turn()];
  const mutate = (v: unknown, depth: number): unknown => {
    if (depth > 3 || next() < 0.3) return samples[Math.floor(next() * samples.length)];
    if (Array.isArray(v)) return v.map((x) => mutate(x, depth + 1));
    if (v !== null && typeof v === "object") {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) if (next() > 0.1) out[k] = next() < 0.5 ? x : mutate(x, depth + 1);
      if (next() < 0.1) out.extra = 1;
      return out;
    }
    return v;
  };
  let checked = 0;
  for (const t of TYPES) {
    for (let i = 0; i < 200; i++) {
      const doc = mutate(turn(), 0);
      for (const lenient of [false, true]) {
        const fast = isValid(t.name as TypeName, doc, lenient);
        const violations = validate(t.name as TypeName, doc, lenient);
        assert.equal(fast, violations.length === 0, `${t.name} (lenient ${lenient}) on ${JSON.stringify(doc)}: ${JSON.stringify(violations)}`);
        checked++;
      }
    }
  }
  assert.ok(checked > 1000);
});

test("validate takes any schema name as a string; an unknown name throws, it is never valid", () => {
  const name: string = "Turn";
  assert.ok(validate(name, {}).some((v) => v.keyword === "required"));
  for (const t of TYPES) assert.doesNotThrow(() => validate(t.name, {}));
  assert.throws(() => validate("NoSuchType", {}), (e: unknown) => e instanceof RangeError && /NoSuchType/.test(e.message) && /Turn/.test(e.message));
  assert.throws(() => validate("toString", {}), RangeError);
});
