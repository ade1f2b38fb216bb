/**
 * The Node.js runner helper at its bounds, in process (streams) and as a real runner behind the
 * real host (`openagents run`), mirroring the Rust `serve_once` tests.
 */

import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { after, test } from "node:test";

import { isEvent, MAX_FRAME, MAX_OUTPUT, VERSION } from "@openagents/client";
import type { Event, Turn } from "@openagents/client";
import { ProgressError, serveOnce, serveStreaming } from "@openagents/client/runner";
import type { Progress } from "@openagents/client/runner";

import { Setup } from "./helpers.js";

function turnLine(task: string): string {
  return JSON.stringify({ schema: VERSION, assignment: "a1", conversation: "c1", agent: { runner: "echo" }, task, cwd: "/" });
}

/** A turn line of exactly `len` bytes (without the newline). */
function turnLineOfLen(len: number): string {
  const base = Buffer.byteLength(turnLine(""));
  return turnLine("t".repeat(len - base));
}

/** Feeds `input` (ended unless `keepOpen`) and collects the output lines as events. */
async function serve(
  input: string | Buffer,
  run: (turn: Turn, progress: Progress) => string | Promise<string>,
  options: { keepOpen?: boolean; answers?: PassThrough } = {},
): Promise<{ events: Event[]; bytes: number }> {
  const inp = options.answers ?? new PassThrough();
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on("data", (c: Buffer) => chunks.push(c));
  inp.write(input);
  if (!options.keepOpen) inp.end();
  await serveStreaming(run, { input: inp, output: out });
  out.end();
  const text = Buffer.concat(chunks).toString("utf8");
  const lines = text.split("\n").slice(0, -1);
  for (const l of lines) assert.ok(Buffer.byteLength(l) <= MAX_FRAME, `a line of ${Buffer.byteLength(l)} bytes`);
  const events = lines.map((l) => JSON.parse(l) as unknown);
  for (const e of events) assert.ok(isEvent(e), `not a valid event: ${JSON.stringify(e).slice(0, 200)}`);
  return { events: events as Event[], bytes: Buffer.concat(chunks).length };
}

test("one turn, one terminal event", async () => {
  const cases: [string, () => string | Promise<string>, Event][] = [
    [turnLine("hi") + "\n", () => "done", { type: "completed", result: "done" }],
    [turnLine("hi"), () => "no newline is fine", { type: "completed", result: "no newline is fine" }],
    [turnLine("hi") + "\r\n", async () => "crlf", { type: "completed", result: "crlf" }],
    [turnLine("hi") + "\n", () => {
      throw new Error("could not");
    }, { type: "failed", message: "could not" }],
    [turnLine("hi") + "\n", () => Promise.reject(new Error("async failure")), { type: "failed", message: "async failure" }],
  ];
  for (const [input, run, expected] of cases) {
    const { events } = await serve(input, () => run());
    assert.deepEqual(events, [expected]);
  }
});

test("refused requests are answered with a failed event, and the application does not run", async () => {
  const cases: [string | Buffer, string][] = [
    ["", "no request: stdin ended before a turn line"],
    ["not json\n", "the request is not JSON"],
    [Buffer.from([0xff, 0xfe, 0x0a]), "the request is not JSON: invalid UTF-8"],
    [turnLine("hi").replace(VERSION, "openagents.agent.runner.v0") + "\n", 'unsupported turn schema "openagents.agent.runner.v0": this runner speaks "openagents.agent.runner.v1"'],
    [turnLine("hi").replace('"runner":"echo"', '"runner":"echo","command":"/bin/sh"') + "\n", "/agent/command"],
    [turnLine("hi").replace('"cwd":"/"', '"cwd":"relative"') + "\n", "/cwd"],
    [turnLine(""), "/task"],
  ];
  for (const [input, needle] of cases) {
    let called = false;
    const { events } = await serve(input, () => {
      called = true;
      return "";
    });
    assert.equal(called, false, `${needle}: the application must not run`);
    assert.equal(events.length, 1);
    const e = events[0]!;
    assert.equal(e.type, "failed");
    assert.ok(e.type === "failed" && e.message.includes(needle), `${needle}: ${JSON.stringify(e)}`);
  }
});

test("request line at MAX_FRAME and one byte past, refused without being read whole", async () => {
  const at = turnLineOfLen(MAX_FRAME);
  assert.equal(Buffer.byteLength(at), MAX_FRAME);
  const ok = await serve(at + "\n", (t) => String(t.task.length));
  assert.equal(ok.events[0]?.type, "completed");
  const okCrlf = await serve(at + "\r\n", (t) => String(t.task.length));
  assert.equal(okCrlf.events[0]?.type, "completed", "a \\r before the newline does not count");
  const past = turnLineOfLen(MAX_FRAME + 1);
  const refused = await serve(past + "\n", () => "");
  assert.equal(refused.events[0]?.type, "failed");
  assert.match((refused.events[0] as { message: string }).message, /longer than MAX_FRAME \(98304 bytes\); it was refused unread/);
  // An endless line without a newline: refused after MAX_FRAME bytes, the stream still open.
  const endless = new PassThrough();
  const start = serve("", () => "", { keepOpen: true, answers: endless });
  for (let i = 0; i < 10; i++) endless.write("x".repeat(64 * 1024));
  const r = await start;
  assert.match((r.events[0] as { message: string }).message, /longer than MAX_FRAME/);
});

test("a result too large becomes a failed event", async () => {
  const overhead = Buffer.byteLength(JSON.stringify({ type: "completed", result: "" }));
  const fits = "r".repeat(MAX_FRAME - overhead);
  assert.deepEqual((await serve(turnLine("hi"), () => fits)).events, [{ type: "completed", result: fits }]);
  const tooBig = await serve(turnLine("hi"), () => fits + "r");
  assert.equal(tooBig.events.length, 1);
  assert.match((tooBig.events[0] as { message: string }).message, /the result is too large: 98305 bytes encoded/);
  // Multi-byte: the bound is on bytes.
  const wide = await serve(turnLine("hi"), () => "é".repeat(MAX_FRAME / 2));
  assert.equal(wide.events[0]?.type, "failed");
  const lone = await serve(turnLine("hi"), () => "bad \ud800 surrogate");
  assert.match((lone.events[0] as { message: string }).message, /lone surrogate/);
});

test("streaming refuses to exceed MAX_OUTPUT, keeping room for the terminal event", async () => {
  let refused: unknown;
  const { events, bytes } = await serve(turnLine("hi"), async (_, progress) => {
    const chunk = "x".repeat(60_000);
    for (;;) {
      try {
        await progress.text(chunk);
      } catch (e) {
        refused = e;
        return "stopped";
      }
    }
  });
  assert.ok(refused instanceof ProgressError && refused.kind === "output_full", String(refused));
  assert.ok(bytes <= MAX_OUTPUT, `${bytes} bytes`);
  assert.deepEqual(events.at(-1), { type: "completed", result: "stopped" });
  // A single event longer than a frame is refused, and nothing is written for it.
  const one = await serve(turnLine("hi"), async (_, progress) => {
    try {
      await progress.text("y".repeat(MAX_FRAME));
      return "written";
    } catch (e) {
      return e instanceof ProgressError ? e.kind : "other";
    }
  });
  assert.deepEqual(one.events, [{ type: "completed", result: "line_too_long" }]);
  // Even a result of a full frame fits after the output is full.
  const full = await serve(turnLine("hi"), async (_, progress) => {
    for (;;) {
      try {
        await progress.text("z".repeat(90_000));
      } catch {
        return "w".repeat(MAX_FRAME - 32);
      }
    }
  });
  assert.equal(full.events.at(-1)?.type, "completed");
  assert.ok(full.bytes <= MAX_OUTPUT);
});

test("exactly one terminal event: progress after the end is refused", async () => {
  let saved: Progress | undefined;
  const { events } = await serve(turnLine("hi"), (_, progress) => {
    saved = progress;
    return "done";
  });
  assert.equal(events.length, 1);
  await assert.rejects(saved!.text("late"), (e: unknown) => e instanceof ProgressError && e.kind === "ended");
});

test("serveOnce answers from a plain function", async () => {
  const inp = new PassThrough();
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on("data", (c: Buffer) => chunks.push(c));
  inp.end(turnLine("ping") + "\n");
  await serveOnce((t) => `pong ${t.task}`, { input: inp, output: out });
  assert.equal(Buffer.concat(chunks).toString(), '{"type":"completed","result":"pong ping"}\n');
});

test("ask writes an approval request and reads the host's answer", async () => {
  const inp = new PassThrough();
  const run = serve(turnLine("hi") + "\n", async (_, progress) => JSON.stringify(await progress.ask("may I?")), { keepOpen: true, answers: inp });
  setTimeout(() => inp.end(JSON.stringify({ type: "approval_answer", id: "ask-1", approved: true, answer: "yes" }) + "\n"), 20);
  const { events } = await run;
  assert.deepEqual(events, [
    { type: "approval_request", id: "ask-1", prompt: "may I?" },
    { type: "completed", result: '{"approved":true,"answer":"yes"}' },
  ]);
  // No answer: the turn fails closed with the helper's error.
  const closed = await serve(turnLine("hi") + "\n", async (_, progress) => JSON.stringify(await progress.ask("may I?")));
  assert.match((closed.events.at(-1) as { message: string }).message, /did not answer the approval request: stdin ended/);
});

/**
 * One line of `openagents run --json`, as the runner's event: the line is the runner's `Event`,
 * or a `ServerEvent` wrapping its projection (`turn_completed` for `completed`).
 */
function runEvent(line: string): { type: string; text?: string; result?: string } {
  const v = JSON.parse(line) as { event?: { type: string; text?: string; result?: string }; type?: string };
  if (!v.event) return v as { type: string };
  const e = v.event;
  if (e.type === "turn_completed") return { type: "completed", result: e.result ?? "" };
  return e;
}

// Through the real host.
const setup = new Setup("runner");
after(() => setup.cleanup());

test("a TypeScript runner from the operator registry works with `openagents run`", () => {
  const r = setup.run(["run", "--runner", "echo-ts", "--json", "hello from node"]);
  assert.equal(r.code, 0, r.stderr);
  const events = r.stdout.trim().split("\n").map(runEvent);
  assert.deepEqual(
    events.filter((e) => e.type === "text").map((e) => e.text),
    ["hello", "from", "node"],
  );
  assert.deepEqual(events.at(-1), { type: "completed", result: "hello from node" });
  // In text mode the streamed progress goes to stderr and only the result to stdout.
  const plain = setup.run(["run", "--runner", "echo-ts", "hello from node"]);
  assert.equal(plain.code, 0, plain.stderr);
  assert.equal(plain.stdout, "hello from node\n");
  assert.match(plain.stderr, /hello from node/);
});

test("the host accepts the helper's bounded failures", () => {
  const big = setup.run(["run", "--runner", "behave", "big-result"]);
  assert.equal(big.code, 1);
  assert.match(big.stderr, /the result is too large: \d+ bytes encoded/);
  const flood = setup.run(["run", "--runner", "behave", "--json", "flood"]);
  assert.equal(flood.code, 0, flood.stderr);
  assert.deepEqual(runEvent(flood.stdout.trim().split("\n").at(-1)!), { type: "completed", result: "15 output_full" });
  const fail = setup.run(["run", "--runner", "behave", "fail it broke"]);
  assert.equal(fail.code, 1);
  assert.match(fail.stderr, /the runner failed: it broke \(runner_failed\)/);
  const ask = setup.run(["run", "--runner", "behave", "ask delete everything?"]);
  assert.equal(ask.code, 0, ask.stderr);
  assert.match(ask.stdout, /"approved":false/, "with nobody to answer, approvals are denied");
});
