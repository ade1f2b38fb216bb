/**
 * `multipleOf` in decimal: the number and the divisor are read as the decimals JSON writes them
 * as, and the quotient must be whole exactly (`0.3` is a multiple of `0.1`, though `0.3 / 0.1` is
 * `2.9999999999999996` in doubles), as the Rust and Python runtimes answer.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { multipleOf, multipleOfViolation } from "@openagents/client/rt";
import type { Violation } from "@openagents/client/rt";

import { rng } from "./helpers.js";

test("a multiple in decimal is one; a number off by any decimal is not", () => {
  const multiples: [number, number][] = [
    [0.3, 0.1], [0.0075, 0.0001], [4.5, 1.5], [-4.5, 1.5], [0, 0.7], [1e308, 1e300], [10, 2],
    [19.99, 0.01], [12391239123, 1e-8], [-9, 3], [10, 0.5], [2 ** 80, 2], [2 ** 60, 2 ** 60], [2 ** 62, 2 ** 60],
  ];
  for (const [v, m] of multiples) assert.equal(multipleOf(v, m), true, `${v} is a multiple of ${m}`);
  const others: [number, number][] = [
    [0.00751, 0.0001], [35, 1.5], [7, 2], [1e308, 0.123456789], [1e-300, 1e-299], [NaN, 1], [Infinity, 1], [19.999, 0.01],
  ];
  for (const [v, m] of others) assert.equal(multipleOf(v, m), false, `${v} is not a multiple of ${m}`);
});

/** The exact quotient of two decimals as JavaScript writes them, by scaling both to integers. */
function exactlyWhole(v: number, m: number): boolean {
  const parts = (n: number): [bigint, number] => {
    if (Number.isInteger(n) && Math.abs(n) < 2 ** 64) return [BigInt(Math.abs(n)), 0];
    const [digits = "0", exponent = "0"] = Math.abs(n).toExponential().split("e");
    const fraction = digits.includes(".") ? digits.length - digits.indexOf(".") - 1 : 0;
    return [BigInt(digits.replace(".", "")), Number(exponent) - fraction];
  };
  const [a, p] = parts(v);
  const [b, q] = parts(m);
  const low = Math.min(p, q);
  return (a * 10n ** BigInt(p - low)) % (b * 10n ** BigInt(q - low)) === 0n;
}

test("the answer is the exact quotient of the written decimals, on random decimals", () => {
  const next = rng(11);
  for (let i = 0; i < 5000; i++) {
    const m = Number((next() * 50 + 0.001).toFixed(Math.floor(next() * 5))) || 0.5;
    const k = Math.floor(next() * 20001) - 10000;
    const v = Number((m * k + [0, 0, 1e-9, 0.01][Math.floor(next() * 4)]!).toFixed(Math.floor(next() * 9)));
    assert.equal(multipleOf(v, m), exactlyWhole(v, m), `${v} multipleOf ${m}`);
  }
});

test("the violation names the keyword and both numbers", () => {
  const out: Violation[] = [];
  multipleOfViolation(out, "/n", 19.999, 0.01);
  assert.deepEqual(out, [{ pointer: "/n", keyword: "multipleOf", message: "must be a multiple of 0.01, is 19.999" }]);
});
