/**
 * The HTTP client against the real `openagents serve --http`, driving a real Node.js runner from
 * a temporary operator registry: typed results, one error class per code, `AbortSignal` ->
 * `interrupt`, and SSE events resumed with `Last-Event-ID` after a dropped stream.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  BusyError,
  ForbiddenError,
  HttpTransport,
  InterruptedError,
  InvalidParamsError,
  isKnownRuntimeEvent,
  isKnownRuntimeState,
  OpenAgentsClient,
  OpenAgentsError,
  ProtocolError,
  RunnerNotFoundError,
  UnauthorizedError,
  VERSION,
} from "@openagents/client";
import type { ServerEvent } from "@openagents/client";

import { checkResumeAhead, Setup, startHttp, waitIdle } from "./helpers.js";
import type { HttpServer } from "./helpers.js";

const setup = new Setup("http");
let server: HttpServer;
let client: OpenAgentsClient;

before(async () => {
  // `serve` serves exactly the runners it names, the first the default.
  server = await startHttp(setup, "echo-ts", ["--runner", "behave"]);
  client = OpenAgentsClient.http({ url: server.url, token: server.token });
});

after(async () => {
  await client?.close();
  await server?.stop();
  setup.cleanup();
});

test("status is typed and valid", async () => {
  const s = await client.status();
  assert.equal(s.schema_version, VERSION);
  assert.ok(isKnownRuntimeState(s.state));
  assert.equal(s.limits.max_frame, 98304);
});

test("a turn through the TypeScript runner: result and its events, in order", async () => {
  const events: ServerEvent[] = [];
  const result = await client.runTurn({ task: "hello over http" }, { onEvent: (e) => events.push(e) });
  assert.equal(result.result, "hello over http");
  const kinds = events.map((e) => e.event.type);
  assert.deepEqual(kinds, ["turn_started", "text", "text", "text", "turn_completed"]);
  const started = events[0]!.event;
  assert.ok(isKnownRuntimeEvent(started) && started.type === "turn_started" && started.assignment === result.assignment && started.runner === "echo-ts");
  for (let i = 1; i < events.length; i++) assert.equal(events[i]!.seq, events[i - 1]!.seq + 1, "consecutive sequence numbers");
});

test("one error class per code, with the code's documented fields", async () => {
  await assert.rejects(client.submit({ task: "x", runner: "no-such-runner" }), (e: unknown) => {
    assert.ok(e instanceof RunnerNotFoundError && e instanceof OpenAgentsError, String(e));
    assert.equal(e.code, "runner_not_found");
    assert.equal(e.retryable, false);
    assert.equal(e.rpcCode, -32005);
    // It says only that: neither the registry's runners nor its path.
    assert.equal(e.message, "unknown runner");
    assert.equal(e.details?.known, undefined);
    return true;
  });
  const intruder = OpenAgentsClient.http({ url: server.url, token: "0".repeat(64) });
  await assert.rejects(intruder.status(), (e: unknown) => e instanceof UnauthorizedError && e.rpcCode === -32001 && !e.message.includes(server.token));
  await assert.rejects(
    (async () => {
      for await (const _ of intruder.events()) break;
    })(),
    (e: unknown) => e instanceof UnauthorizedError,
  );
});

test("params are checked before sending; the runtime checks them too", async () => {
  // An empty task breaks `minLength`: refused locally, with the violation's pointer.
  await assert.rejects(client.submit({ task: "" }), (e: unknown) => {
    assert.ok(e instanceof InvalidParamsError);
    assert.deepEqual(e.details?.violations?.map((v) => [v.pointer, v.keyword]), [["/task", "minLength"]]);
    return true;
  });
  const unchecked = OpenAgentsClient.http({ url: server.url, token: server.token, validateParams: false });
  await assert.rejects(unchecked.submit({ task: "" }), (e: unknown) => {
    assert.ok(e instanceof InvalidParamsError, String(e));
    assert.ok(e.details?.violations?.some((v) => v.pointer === "/params/task" && v.keyword === "minLength"), JSON.stringify(e.details));
    return true;
  });
});

test("busy while a turn runs; aborting the submit interrupts the turn", async () => {
  const before = await client.status();
  const controller = new AbortController();
  const events: ServerEvent[] = [];
  let hanging!: () => void;
  const started = new Promise<void>((r) => (hanging = r));
  const running = client.runTurn(
    { task: "hang", runner: "behave" },
    {
      signal: controller.signal,
      onEvent: (e) => {
        events.push(e);
        if (e.event.type === "text") hanging();
      },
    },
  );
  running.catch(() => undefined); // Observed below; settled possibly before that.
  // Once the runner has said it started (it then waits to be stopped), a second submit is
  // refused; then aborting the first interrupts it.
  await Promise.race([started, running.then(() => assert.fail("the turn ended before its runner started"))]);
  await assert.rejects(client.submit({ task: "second" }), (e: unknown) => e instanceof BusyError && e.retryable && e.rpcCode === -32003);
  controller.abort();
  await assert.rejects(running, (e: unknown) => e instanceof InterruptedError && e.retryable);
  assert.equal(events.at(-1)?.event.type, "turn_failed");
  await waitIdle(client);
  const after = await client.status();
  assert.equal(after.counters.interrupted, before.counters.interrupted + 1);
  // An already-aborted signal sends nothing.
  const aborted = AbortSignal.abort();
  await assert.rejects(client.submit({ task: "never" }, { signal: aborted }), (e: unknown) => (e as Error).name === "AbortError");
  assert.equal((await client.status()).counters.submitted, after.counters.submitted);
});

test("a dropped event stream resumes with Last-Event-ID: every event once, in order", async () => {
  await waitIdle(client);
  const requests: { lastEventId: string | null }[] = [];
  let connections = 0;
  // A fetch that cuts the first event stream after its second event (the stream's opening
  // comment and `retry:` block carries no `data:` and is not an event).
  const cutting: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    const url = String(input);
    if (!url.endsWith("/events")) return response;
    requests.push({ lastEventId: new Headers(init?.headers).get("last-event-id") });
    connections += 1;
    if (connections > 1 || !response.body) return response;
    // Pass the stream through up to the end of its second event, then fail it.
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    /** Where the second block with a `data:` line ends (after its blank line), or -1. */
    const endOfSecondEvent = (): number => {
      let events = 0;
      for (let start = 0, end = text.indexOf("\n\n"); end !== -1; start = end + 2, end = text.indexOf("\n\n", start)) {
        if (/^data:/m.test(text.slice(start, end)) && ++events === 2) return end + 2;
      }
      return -1;
    };
    const body = new ReadableStream<Uint8Array>({
      async pull(ctl) {
        // Reads on until the cut (a pull that enqueues nothing is not called again).
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return ctl.close();
          text += decoder.decode(value, { stream: true });
          const cut = endOfSecondEvent();
          if (cut === -1) continue;
          ctl.enqueue(new TextEncoder().encode(text.slice(0, cut)));
          await reader.cancel();
          return ctl.error(new TypeError("terminated (the test cut the stream)"));
        }
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
  const flaky = new OpenAgentsClient(new HttpTransport({ url: server.url, token: server.token, fetch: cutting, reconnectDelayMs: 10 }));
  const start = (await client.status()).last_seq;
  const stream = flaky.events({ since: start });
  await stream.ready;
  const seen: ServerEvent[] = [];
  const done = (async () => {
    for await (const ev of stream) {
      seen.push(ev);
      if (ev.event.type === "turn_completed") break;
    }
  })();
  const result = await client.submit({ task: "one two three four five" });
  await done;
  assert.equal(result.result, "one two three four five");
  assert.deepEqual(
    seen.map((e) => e.event.type),
    ["turn_started", "text", "text", "text", "text", "text", "turn_completed"],
  );
  assert.deepEqual(
    seen.map((e) => e.seq),
    seen.map((_, i) => start + 1 + i),
    "no event twice, none skipped",
  );
  assert.ok(connections >= 2, "the stream was reopened");
  assert.equal(requests[0]!.lastEventId, String(start));
  assert.equal(requests[1]!.lastEventId, String(start + 2), "resumed after the last event seen");
});

test("events since a point replay what the runtime holds", async () => {
  await waitIdle(client);
  const last = (await client.status()).last_seq;
  const stream = client.events({ since: Math.max(0, last - 3) });
  const seqs: number[] = [];
  for await (const ev of stream) {
    seqs.push(ev.seq);
    if (ev.seq >= last) break;
  }
  assert.deepEqual(seqs, [last - 2, last - 1, last].filter((s) => s > 0));
});

test("a resume point ahead of the runtime gets a gap, then every event it holds", async () => {
  await checkResumeAhead(client);
});

test("unknown event kinds and result fields are kept; malformed answers are protocol errors", async () => {
  const fake = (body: string, contentType: string): typeof fetch => async () => new Response(body, { status: 200, headers: { "content-type": contentType } });
  const future = 'id: 9\ndata: {"seq":9,"event":{"type":"turn_paused","why":"lunch"}}\n\nid: 10\ndata: {"seq":10,"event":{"type":"shutting_down"}}\n\n';
  const reader = new OpenAgentsClient(new HttpTransport({ url: server.url, token: "t", fetch: fake(future, "text/event-stream") }));
  const got: ServerEvent[] = [];
  for await (const ev of reader.events()) got.push(ev);
  assert.equal(got.length, 2);
  assert.equal(isKnownRuntimeEvent(got[0]!.event), false);
  assert.equal(got[0]!.event.type, "turn_paused");
  const status = await client.status();
  const newer = { ...status, state: "hibernating", a_new_field: 1 };
  const lenient = new OpenAgentsClient(new HttpTransport({ url: server.url, token: "t", fetch: fake(JSON.stringify({ id: 1, result: newer }), "application/json") }));
  const s = await lenient.status();
  assert.equal(s.state, "hibernating");
  assert.equal(isKnownRuntimeState(s.state), false);
  const broken = new OpenAgentsClient(new HttpTransport({ url: server.url, token: "t", fetch: fake(JSON.stringify({ id: 1, result: { state: 5 } }), "application/json") }));
  await assert.rejects(broken.status(), (e: unknown) => e instanceof ProtocolError && e.violations.some((v) => v.pointer === "/state"));
  const unknownCode = new OpenAgentsClient(
    new HttpTransport({
      url: server.url,
      token: "t",
      fetch: fake(JSON.stringify({ id: 1, error: { code: -32099, message: "new", data: { code: "quota_exceeded", message: "over quota", retryable: true } } }), "application/json"),
    }),
  );
  await assert.rejects(unknownCode.status(), (e: unknown) => e instanceof OpenAgentsError && e.name === "UnknownCodeError" && e.code === "quota_exceeded" && !e.retryable);
});

test("an observer credential may read but not submit", async () => {
  const s = new Setup("http-observer");
  const { writeFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  writeFileSync(join(s.dir, "credentials.toml"), `[credentials.watcher]\ntoken = "observer-token-0123456789"\nrole = "observer"\n`);
  const { spawn } = await import("node:child_process");
  const { BIN } = await import("./helpers.js");
  const child = spawn(BIN, ["serve", "--http", "--runner", "echo-ts", "--credentials", join(s.dir, "credentials.toml")], { env: s.env, stdio: ["ignore", "pipe", "inherit"] });
  try {
    const line = await new Promise<string>((resolve) => child.stdout.once("data", (b: Buffer) => resolve(b.toString())));
    const { url } = JSON.parse(line) as { url: string };
    const watcher = OpenAgentsClient.http({ url, token: "observer-token-0123456789" });
    assert.equal((await watcher.status()).state, "idle");
    await assert.rejects(watcher.submit({ task: "x" }), (e: unknown) => e instanceof ForbiddenError && e.rpcCode === -32002);
  } finally {
    child.kill();
    s.cleanup();
  }
});

test("shutdown ends the event stream with its final event", async () => {
  const stream = client.events();
  await stream.ready;
  const kinds: string[] = [];
  const reading = (async () => {
    for await (const ev of stream) kinds.push(ev.event.type);
  })();
  assert.deepEqual(await client.shutdown(), { shutting_down: true });
  await reading;
  assert.equal(kinds.at(-1), "shutting_down");
});
