/**
 * Runtime support for the generated validators: JSON pointers, violations, and the checks that
 * are the same everywhere (lengths in code points, integers, JSON equality). The TypeScript
 * counterpart of the Rust `openagents_protocol::rt`; messages say the same things.
 *
 * Nothing here reads a schema: every rule lives in the generated code.
 */

/** One way a document breaks its schema. */
export interface Violation {
  /** The JSON pointer (RFC 6901) of the offending value; empty for the whole document. */
  pointer: string;
  /** The schema keyword that was broken, such as `maxLength` or `required`. */
  keyword: string;
  /** What is wrong, for a person to read. */
  message: string;
}

/** A JSON object, as the validators see one. */
export type JsonObject = { [key: string]: unknown };

/** Whether `v` is a JSON object (not `null`, not an array). */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Whether `v` is an array. */
export function isArray(v: unknown): v is unknown[] {
  return Array.isArray(v);
}

/**
 * Whether `v` is a number JSON can hold: a finite one. `NaN` and the infinities are numbers to
 * JavaScript but not to JSON (`JSON.stringify` writes them as `null`), so no schema's `number`
 * allows them.
 */
export function isNumber(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(v);
}

/** Whether `v` is an integer in JSON Schema's sense: a finite number with no fractional part (`1.0` is one). */
export function isInteger(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v);
}

const hasOwn = Object.prototype.hasOwnProperty;

/** Property `k` of `o` when it is `o`'s own (for names `Object.prototype` also answers to). */
export function own(o: JsonObject, k: string): unknown {
  return hasOwn.call(o, k) ? Object.getOwnPropertyDescriptor(o, k)?.value : undefined;
}

/** Whether `k` is `o`'s own property: for the keys a `for...in` loop yields, where inherited ones are not members. */
export function has(o: JsonObject, k: string): boolean {
  return hasOwn.call(o, k);
}

/** The own property names of `o` (its own enumerable string keys, as `Object.keys` lists them). */
export function keysOf(o: JsonObject): string[] {
  return Object.keys(o);
}

/**
 * How deep arrays and objects may nest: 127 levels, the most the Rust runtime reads (serde_json's
 * recursion limit: it refuses the 128th level). Where the validators descend into an array or
 * object nested deeper they stop with a `json` violation (`depthViolation`), the same in the fast
 * and the explaining check, rather than overflow the stack on a deeply nested value.
 */
export const MAX_DEPTH = 127;

/** An array or object nested deeper than `MAX_DEPTH` levels (keyword `json`, as the Rust runtime reports a document it cannot read). */
export function depthViolation(out: Violation[], p: string): void {
  report(out, p, "json", `recursion limit exceeded: arrays and objects may nest at most ${MAX_DEPTH} levels deep`);
}

/** The JSON pointer of property `k` under pointer `p` (`~` and `/` escaped, RFC 6901). */
export function keyOf(p: string, k: string): string {
  return p + "/" + k.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** The number of Unicode code points in `s` (a lone surrogate counts as one). */
export function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const u = s.charCodeAt(i);
    if (u >= 0xd800 && u <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n--;
      i++;
    }
  }
  return n;
}

/**
 * Whether `s` has at most `max` code points. Counts only when the UTF-16 length cannot decide:
 * a string has at least half as many code points as units, and at most as many.
 */
export function maxLength(s: string, max: number): boolean {
  const units = s.length;
  return units <= max || (units <= 2 * max && codePoints(s) <= max);
}

/** Whether `s` has at least `min` code points, counting only when the UTF-16 length cannot decide. */
export function minLength(s: string, min: number): boolean {
  const units = s.length;
  if (units < min) return false;
  return units >= 2 * min || codePoints(s) >= min;
}

/** A `RegExp` for a schema pattern: ECMA-262 with the `u` flag, matched anywhere (not anchored). */
export function regex(source: string): RegExp {
  return new RegExp(source, "u");
}

/** JSON Schema equality: numbers by value, arrays in order, objects regardless of key order. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (isArray(a) && isArray(b)) {
    return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => hasOwn.call(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}

/** Records a violation. */
export function report(out: Violation[], pointer: string, keyword: string, message: string): void {
  out.push({ pointer, keyword, message });
}

/** The JSON type of a value, as the `type` keyword spells it. */
export function typeName(v: unknown): string {
  if (v === null) return "null";
  if (isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  if (typeof v === "string" || typeof v === "boolean" || typeof v === "object") return typeof v;
  return typeof v;
}

/** A short, quoted preview of a string for messages. */
export function preview(s: string): string {
  const cut = Array.from(s.slice(0, 80)).slice(0, 40).join("");
  return JSON.stringify(cut.length < s.length ? cut + "…" : cut);
}

function previewValue(v: unknown): string {
  if (typeof v === "string") return preview(v);
  // `JSON.stringify` writes these as `null`: name them.
  if (typeof v === "number" && !Number.isFinite(v)) return String(v);
  if (isArray(v)) return "an array";
  if (isObject(v)) return "an object";
  return String(JSON.stringify(v));
}

/** A `type` violation. */
export function typeViolation(out: Violation[], p: string, expected: string, found: unknown): void {
  if (typeof found === "number" && !Number.isFinite(found)) {
    // `NaN` or an infinity: a number to JavaScript, but not one JSON can hold.
    report(out, p, "type", `must be ${expected}, found ${String(found)}, which is not a finite number`);
  } else {
    report(out, p, "type", `must be ${expected}, found ${typeName(found)}`);
  }
}

/** Where the closest failed branch of an `anyOf` or `oneOf` fails (the fewest violations). */
function explainClosest(branches: Violation[][]): string {
  let best = -1;
  branches.forEach((b, i) => {
    if (b.length > 0 && (best < 0 || b.length < branches[best]!.length)) best = i;
  });
  if (best < 0) return "";
  const v = branches[best]!;
  const shown = v.slice(0, 3).map((x) => `${x.pointer === "" ? "(root)" : x.pointer}: ${x.message}`).join("; ");
  const more = v.length > 3 ? ` (and ${v.length - 3} more)` : "";
  return `; the closest, branch ${best}, fails at ${shown}${more}`;
}

/** An `anyOf` no branch matched; `branches` holds each branch's violations. */
export function anyOfViolation(out: Violation[], p: string, branches: Violation[][]): void {
  report(out, p, "anyOf", `must match at least one of ${branches.length} schemas, matches none${explainClosest(branches)}`);
}

/** The verdict of a `oneOf`: a violation unless exactly one branch (listed in `matched`) matched. */
export function oneOfVerdict(out: Violation[], p: string, matched: number[], branches: Violation[][]): void {
  if (matched.length === 1) return;
  if (matched.length === 0) {
    report(out, p, "oneOf", `must match exactly one of ${branches.length} schemas, matches none${explainClosest(branches)}`);
  } else {
    report(out, p, "oneOf", `must match exactly one of ${branches.length} schemas, matches ${matched.length} (branches ${matched[0]} and ${matched[1]})`);
  }
}

/** A `not` whose schema matched. */
export function notViolation(out: Violation[], p: string): void {
  report(out, p, "not", "must not match the schema under `not`, and does");
}

/** A `const` violation. */
export function constViolation(out: Violation[], p: string, found: unknown, expected: unknown): void {
  report(out, p, "const", `must be ${JSON.stringify(expected)}, found ${previewValue(found)}`);
}

/** An `enum` violation. */
export function enumViolation(out: Violation[], p: string, found: unknown, allowed: readonly unknown[]): void {
  report(out, p, "enum", `must be one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}, found ${previewValue(found)}`);
}

/** A `minLength` violation. */
export function minLengthViolation(out: Violation[], p: string, s: string, min: number): void {
  report(out, p, "minLength", `must be at least ${min} characters long, is ${codePoints(s)}`);
}

/** A `maxLength` violation. */
export function maxLengthViolation(out: Violation[], p: string, s: string, max: number): void {
  report(out, p, "maxLength", `must be at most ${max} characters long, is ${codePoints(s)}`);
}

/** A `pattern` violation. */
export function patternViolation(out: Violation[], p: string, s: string, pattern: string): void {
  report(out, p, "pattern", `${preview(s)} does not match the pattern \`${pattern}\``);
}

const RELATIONS: { readonly [keyword: string]: string } = {
  minimum: "at least",
  maximum: "at most",
  exclusiveMinimum: "greater than",
  exclusiveMaximum: "less than",
};

/** A bound violation for a number (`keyword` is the bound's keyword). */
export function boundViolation(out: Violation[], p: string, keyword: string, found: number, bound: number): void {
  report(out, p, keyword, `must be ${RELATIONS[keyword] ?? "within"} ${bound}, is ${found}`);
}

/** A finite number as an exact decimal, `mantissa × 10^exponent`: the shortest decimal that reads
 * back as it (what JSON text writes for it: `0.1` is 1 × 10^-1, not the binary fraction next to it),
 * except a whole one below 2^64, which is the integer it holds (2^60 is 1152921504606846976, not the
 * 1152921504606847000 its shortest decimal says). */
function decimal(n: number): [bigint, number] {
  if (Number.isInteger(n) && Math.abs(n) < 2 ** 64) return [BigInt(Math.abs(n)), 0];
  const [digits = "0", exponent = "0"] = Math.abs(n).toExponential().split("e");
  const dot = digits.indexOf(".");
  const fraction = dot < 0 ? 0 : digits.length - dot - 1;
  return [BigInt(digits.replace(".", "")), Number(exponent) - fraction];
}

/** `multipleOf`: whether `value` divided by `multiple` (positive) is an integer, both read as the
 * decimal numbers JSON writes them as (`0.3` is a multiple of `0.1`, `0.0075` of `0.0001`),
 * exactly, as the Rust and Python runtimes answer. */
export function multipleOf(value: number, multiple: number): boolean {
  if (!Number.isFinite(value)) return false;
  if (Number.isSafeInteger(value) && Number.isSafeInteger(multiple)) return value % multiple === 0;
  if (value === 0) return true;
  const [a, p] = decimal(value);
  const [b, q] = decimal(multiple);
  if (p >= q) {
    let power = 1n % b;
    let base = 10n % b;
    for (let k = p - q; k > 0; k >>= 1) {
      if (k & 1) power = (power * base) % b;
      base = (base * base) % b;
    }
    return ((a % b) * power) % b === 0n;
  }
  return a % (b * 10n ** BigInt(q - p)) === 0n;
}

/** A `multipleOf` violation. */
export function multipleOfViolation(out: Violation[], p: string, found: number, multiple: number): void {
  report(out, p, "multipleOf", `must be a multiple of ${multiple}, is ${found}`);
}

/** An items-count violation. */
export function itemsViolation(out: Violation[], p: string, keyword: string, length: number, bound: number): void {
  report(out, p, keyword, `must have ${keyword === "minItems" ? "at least" : "at most"} ${bound} items, has ${length}`);
}

/** `contains` (with `minContains` or `maxContains`): `count` elements match its schema, beyond `bound`. */
export function containsViolation(out: Violation[], p: string, keyword: string, count: number, bound: number): void {
  report(out, p, keyword, `must have ${keyword === "maxContains" ? "at most" : "at least"} ${bound} items matching the schema under \`contains\`, has ${count}`);
}

/** `minProperties` or `maxProperties`: an object of `count` members beyond `bound`. */
export function propertiesViolation(out: Violation[], p: string, keyword: string, count: number, bound: number): void {
  report(out, p, keyword, `must have ${keyword === "minProperties" ? "at least" : "at most"} ${bound} properties, has ${count}`);
}

/**
 * `uniqueItems`: the positions of the first element equal, as JSON, to an earlier one (objects
 * with the same members in any order are equal), or `null` when every element differs. Each
 * element is written once in a canonical form and looked up in a `Map`: linear time.
 */
export function firstRepeat(items: readonly unknown[]): [number, number] | null {
  const seen = new Map<string, number>();
  for (let i = 0; i < items.length; i++) {
    const key = canonical(items[i]);
    const first = seen.get(key);
    if (first !== undefined) return [first, i];
    seen.set(key, i);
  }
  return null;
}

/** A `uniqueItems` violation, when two elements of `items` are equal. */
export function uniqueViolation(out: Violation[], p: string, items: readonly unknown[]): void {
  const repeat = firstRepeat(items);
  if (repeat) report(out, p, "uniqueItems", `items ${repeat[0]} and ${repeat[1]} are equal; the items must be unique`);
}

let unlike = 0;

// One text per JSON value, the same for equal values: strings and names prefixed with their
// length, object members sorted by name (`String(-0)` is "0", as JSON equality has it). A value
// nested deeper than `MAX_DEPTH` is not followed: it is taken as unlike any other.
function canonical(v: unknown, d = 0): string {
  if (v === null) return "n";
  if (typeof v === "boolean") return v ? "t" : "f";
  if (typeof v === "number") return `d${String(v)};`;
  if (typeof v === "string") return `s${v.length}:${v}`;
  if (d >= MAX_DEPTH) return `x${unlike++};`;
  if (isArray(v)) return `a${v.length}:${v.map((x) => canonical(x, d + 1)).join("")}`;
  if (isObject(v)) {
    const keys = Object.keys(v).sort();
    return `o${keys.length}:${keys.map((k) => `${k.length}:${k}${canonical(v[k], d + 1)}`).join("")}`;
  }
  return `?${typeof v}`;
}

/**
 * The exhaustiveness check for discriminated unions: call it in the `default` branch of a
 * `switch` over every known kind, and the compiler refuses the `switch` once a kind is added to
 * the schema and not handled. At run time (a value the types did not foresee) it throws.
 */
export function assertNever(value: never, message?: string): never {
  throw new Error(message ?? `unexpected value: ${JSON.stringify(value)}`);
}
