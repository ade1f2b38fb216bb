/** The Server-Sent Events parser: every split of a stream gives the same events; bounds hold. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { SseParser } from "@openagents/client";
import type { SseMessage } from "@openagents/client";

const STREAM =
  "\ufeff: keep-alive\n\nid: 1\ndata: {\"a\":1}\n\n" +
  "id: 2\r\ndata: line one\r\ndata: line two\r\n\r\n" +
  "event: custom\rid: 3\rdata:no-space\r\r" +
  "data: ünïcødé 😀\nretry: 10\nunknown: x\n\n" +
  "id: 4\ndata: {\"b\":2}\n\n" +
  "data: unterminated";

const EXPECTED: SseMessage[] = [
  { id: "1", event: "message", data: '{"a":1}' },
  { id: "2", event: "message", data: "line one\nline two" },
  { id: "3", event: "custom", data: "no-space" },
  { id: "3", event: "message", data: "ünïcødé 😀" },
  { id: "4", event: "message", data: '{"b":2}' },
];

function parse(chunks: Uint8Array[], limit = 1 << 20): SseMessage[] {
  const p = new SseParser(limit);
  const out: SseMessage[] = [];
  for (const c of chunks) out.push(...p.push(c));
  out.push(...p.end());
  return out;
}

test("events are the same however the stream is split", () => {
  const bytes = new TextEncoder().encode(STREAM);
  assert.deepEqual(parse([bytes]), EXPECTED);
  for (let cut = 0; cut <= bytes.length; cut++) {
    assert.deepEqual(parse([bytes.subarray(0, cut), bytes.subarray(cut)]), EXPECTED, `split at byte ${cut}`);
  }
  assert.deepEqual(
    parse(Array.from(bytes, (b) => Uint8Array.of(b))),
    EXPECTED,
    "one byte at a time",
  );
});

test("an event larger than the limit is refused", () => {
  const big = new TextEncoder().encode(`data: ${"x".repeat(100)}\n\n`);
  assert.throws(() => parse([big], 50), /larger than 50/);
  const noNewline = new TextEncoder().encode("x".repeat(100));
  assert.throws(() => parse([noNewline], 50), /larger than 50/);
  assert.equal(parse([big], 200).length, 1);
});
