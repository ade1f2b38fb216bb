/**
 * The WebSocket transport against the real `openagents serve --http` (which serves `/frontend/v2`
 * on its port), with real runners from a temporary registry: typed calls, events via
 * `subscribe`, approvals answered by `onApproval` (and denied when it fails or is absent), typed
 * refusals, `AbortSignal` -> `interrupt`, and the close code and reason of a closed socket.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import {
  ForbiddenError,
  InterruptedError,
  isKnownRuntimeEvent,
  OpenAgentsClient,
  RunnerFailedError,
  RunnerNotFoundError,
  UnauthorizedError,
  VERSION,
  WebSocketClosedError,
  WebSocketTransport,
} from "@openagents/client";
import type { ApprovalHandler, ApprovalPrompt, ServerEvent, WebSocketConstructor } from "@openagents/client";
import { connectWebSocket } from "@openagents/client/node";

import { BIN, checkResumeAhead, Setup, startHttp, waitIdle } from "./helpers.js";
import type { HttpServer } from "./helpers.js";

const setup = new Setup("ws");
let server: HttpServer;
let client: OpenAgentsClient;

/** `ws` as a WHATWG `WebSocket` constructor: what a browser's global would be (subprotocol auth, no headers read). */
async function whatwgWebSocket(): Promise<WebSocketConstructor> {
  const name: string = "ws";
  return ((await import(name)) as { default: WebSocketConstructor }).default;
}

before(async () => {
  // `serve` serves exactly the runners it names, the first the default.
  server = await startHttp(setup, "echo-ts", ["--runner", "behave"]);
  client = connectWebSocket({ url: server.url, token: server.token });
});

after(async () => {
  await client?.close();
  await server?.stop();
  setup.cleanup();
});

test("status and submit over the WebSocket are typed, and errors are their classes", async () => {
  const s = await client.status();
  assert.equal(s.schema_version, VERSION);
  assert.equal(s.state, "idle");
  const r = await client.submit({ task: "hello over ws" });
  assert.equal(r.result, "hello over ws");
  // It says only that: neither the registry's runners nor its path.
  await assert.rejects(client.submit({ task: "x", runner: "no-such-runner" }), (e: unknown) => e instanceof RunnerNotFoundError && e.message === "unknown runner" && e.details?.known === undefined);
  // Requests on one socket run concurrently: a status answers while a submit is in flight.
  const slow = client.submit({ task: "words a b c", runner: "behave" });
  assert.equal(typeof (await client.status()).counters.submitted, "number");
  assert.equal((await slow).result, "words a b c");
});

test("events stream as typed ServerEvents via subscribe; since replays; two streams share the socket", async () => {
  await waitIdle(client);
  const events: ServerEvent[] = [];
  const result = await client.runTurn({ task: "streamed over ws" }, { onEvent: (e) => events.push(e) });
  assert.equal(result.result, "streamed over ws");
  assert.deepEqual(
    events.map((e) => e.event.type),
    ["turn_started", "text", "text", "text", "turn_completed"],
  );
  const started = events[0]!.event;
  assert.ok(isKnownRuntimeEvent(started) && started.type === "turn_started" && started.assignment === result.assignment);
  for (let i = 1; i < events.length; i++) assert.equal(events[i]!.seq, events[i - 1]!.seq + 1, "consecutive sequence numbers");

  // A second stream with `since` on the same socket replays the turn; the first is unaffected.
  const first = events[0]!.seq;
  const live = client.events();
  await live.ready;
  const replay = client.events({ since: first - 1 });
  await replay.ready;
  const replayed: number[] = [];
  for await (const ev of replay) {
    replayed.push(ev.seq);
    if (ev.seq >= events.at(-1)!.seq) break;
  }
  assert.deepEqual(
    replayed,
    events.map((e) => e.seq),
  );
  const next = client.submit({ task: "after the replay" });
  const seen: string[] = [];
  for await (const ev of live) {
    seen.push(ev.event.type);
    if (ev.event.type === "turn_completed") break;
  }
  await next;
  assert.deepEqual(seen, ["turn_started", "text", "text", "text", "turn_completed"], "the live stream saw only the new turn, once");
});

/**
 * A runtime of its own for approval tests: every attached client allowed to answer approvals is
 * asked, and the first answer wins, so no other client may be attached.
 */
async function withOwnRuntime(run: (url: string, token: string) => Promise<void>): Promise<void> {
  const own = await startHttp(setup, "ask");
  try {
    await run(own.url, own.token);
  } finally {
    await own.stop();
  }
}

test("a resume point ahead of the runtime gets a gap, then every event it holds, over the WebSocket", async () => {
  await checkResumeAhead(client);
});

test("an approval request is answered by onApproval (sync or async)", async () => {
  const prompts: ApprovalPrompt[] = [];
  const handlers = [
    (p: ApprovalPrompt): boolean => {
      prompts.push(p);
      return true;
    },
    async (p: ApprovalPrompt): Promise<{ approved: boolean; answer: string }> => {
      prompts.push(p);
      await new Promise((r) => setTimeout(r, 20));
      return { approved: true, answer: "go" };
    },
  ];
  for (const onApproval of handlers) {
    await withOwnRuntime(async (url, token) => {
      const alice = connectWebSocket({ url, token, onApproval });
      try {
        const events: ServerEvent[] = [];
        const r = await alice.runTurn({ task: "deploy the site", runner: "ask" }, { onEvent: (e) => events.push(e) });
        assert.equal(r.result, "approved: deploy the site");
        assert.deepEqual(
          events.map((e) => e.event.type),
          ["turn_started", "text", "approval_requested", "approval_resolved", "turn_completed"],
        );
        const resolved = events[3]!.event;
        assert.ok(isKnownRuntimeEvent(resolved) && resolved.type === "approval_resolved" && resolved.approved);
      } finally {
        await alice.close();
      }
    });
  }
  assert.equal(prompts.length, 2);
  assert.equal(prompts[0]!.prompt, "May I do this: deploy the site?");
  assert.equal(typeof prompts[0]!.request_id, "string");
});

test("an approval is denied when onApproval throws, rejects, or there is none (fail closed)", async () => {
  const cases: [string, ApprovalHandler | undefined][] = [
    ["throws", () => {
      throw new Error("the handler broke");
    }],
    ["rejects", async () => Promise.reject(new Error("no"))],
    ["returns garbage", () => ({ approved: "yes" }) as unknown as boolean],
    ["no handler", undefined],
  ];
  for (const [name, onApproval] of cases) {
    await withOwnRuntime(async (url, token) => {
      const bob = connectWebSocket({ url, token, ...(onApproval ? { onApproval } : {}) });
      try {
        const events: ServerEvent[] = [];
        await assert.rejects(bob.runTurn({ task: "drop the table", runner: "ask" }, { onEvent: (e) => events.push(e) }), (e: unknown) => {
          assert.ok(e instanceof RunnerFailedError, `${name}: ${String(e)}`);
          assert.match(e.message, /denied: drop the table/);
          return true;
        });
        const kinds = events.map((e) => e.event.type);
        assert.ok(kinds.includes("approval_requested"), `${name}: the client was asked: ${kinds.join(",")}`);
        const answer = events.find((e) => e.event.type === "approval_resolved")?.event;
        assert.ok(answer !== undefined && isKnownRuntimeEvent(answer) && answer.type === "approval_resolved" && answer.approved === false, `${name}: denied by this client: ${kinds.join(",")}`);
      } finally {
        await bob.close();
      }
    });
  }
});

test("only credentials allowed to answer are asked; a grant without events gets a typed refusal", async () => {
  const s = new Setup("ws-grants");
  writeFileSync(
    join(s.dir, "credentials.toml"),
    [
      `[credentials.alice]\ntoken = "alice-token-0123456789"\nrole = "controller"\n`,
      `[credentials.watcher]\ntoken = "watcher-token-0123456789"\nrole = "observer"\n`,
      `[credentials.blind]\ntoken = "blind-token-0123456789"\nmethods = ["status"]\nevents = false\n`,
    ].join("\n"),
  );
  const child = spawn(BIN, ["serve", "--http", "--runner", "ask", "--credentials", join(s.dir, "credentials.toml")], { env: s.env, stdio: ["ignore", "pipe", "inherit"] });
  const clients: OpenAgentsClient[] = [];
  try {
    const line = await new Promise<string>((resolve) => child.stdout.once("data", (b: Buffer) => resolve(b.toString())));
    const { url } = JSON.parse(line) as { url: string };
    // A watcher without a handler is never asked, so it cannot deny on alice's behalf.
    const watcher = connectWebSocket({ url, token: "watcher-token-0123456789" });
    const alice = connectWebSocket({ url, token: "alice-token-0123456789", onApproval: () => true });
    const blind = connectWebSocket({ url, token: "blind-token-0123456789" });
    clients.push(watcher, alice, blind);
    const watched = watcher.events();
    await watched.ready;
    assert.equal((await alice.submit({ task: "ship it" })).result, "approved: ship it");
    const kinds: string[] = [];
    for await (const ev of watched) {
      kinds.push(ev.event.type);
      if (ev.event.type === "turn_completed") break;
    }
    assert.deepEqual(kinds, ["turn_started", "text", "approval_requested", "approval_resolved", "turn_completed"]);
    assert.equal((await blind.status()).state, "idle");
    await assert.rejects(blind.events().ready, (e: unknown) => e instanceof ForbiddenError);
    await assert.rejects(
      (async () => {
        for await (const _ of blind.events()) break;
      })(),
      (e: unknown) => e instanceof ForbiddenError && e.message.includes("blind"),
    );
  } finally {
    for (const c of clients) await c.close();
    child.kill();
    s.cleanup();
  }
});

test("a bad token is refused with UnauthorizedError (Node.js), or a close error naming the code (browser-style)", async () => {
  const bad = "0".repeat(64);
  const intruder = connectWebSocket({ url: server.url, token: bad });
  await assert.rejects(intruder.status(), (e: unknown) => {
    assert.ok(e instanceof UnauthorizedError, String(e));
    assert.equal(e.rpcCode, -32001);
    assert.ok(!e.message.includes(bad) && !e.message.includes(server.token));
    return true;
  });
  await assert.rejects(
    (async () => {
      for await (const _ of intruder.events()) break;
    })(),
    (e: unknown) => e instanceof UnauthorizedError,
  );
  await intruder.close();

  // A browser cannot read the refusal: the socket just fails to open.
  const WS = await whatwgWebSocket();
  const browser = OpenAgentsClient.websocket({ url: server.url, token: bad, WebSocket: WS });
  await assert.rejects(browser.status(), (e: unknown) => e instanceof WebSocketClosedError && e.closeCode === 1006 && /cannot open the WebSocket/.test(e.message));
  await browser.close();
});

test("the browser-style constructor authenticates with the bearer subprotocol", async () => {
  const WS = await whatwgWebSocket();
  const transport = new WebSocketTransport({ url: server.url, token: server.token, WebSocket: WS });
  assert.equal(transport.where, new URL("frontend/v2", server.url.replace(/^http/, "ws")).href);
  const browser = new OpenAgentsClient(transport);
  try {
    assert.equal((await browser.status()).state, "idle");
    assert.equal((await browser.submit({ task: "from a browser" })).result, "from a browser");
  } finally {
    await browser.close();
  }
});

test("aborting a submit over the WebSocket interrupts the turn", async () => {
  await waitIdle(client);
  const before = await client.status();
  const controller = new AbortController();
  const events: ServerEvent[] = [];
  const running = client.runTurn(
    { task: "hang", runner: "behave" },
    {
      signal: controller.signal,
      onEvent: (e) => {
        events.push(e);
        if (e.event.type === "text") controller.abort();
      },
    },
  );
  await assert.rejects(running, (e: unknown) => e instanceof InterruptedError && e.retryable);
  assert.equal(events.at(-1)?.event.type, "turn_failed");
  await waitIdle(client);
  assert.equal((await client.status()).counters.interrupted, before.counters.interrupted + 1);
});

test("a closed socket fails calls with its close code and reason", async () => {
  // Closed by this client: a clear error, not a hang.
  const mine = connectWebSocket({ url: server.url, token: server.token });
  assert.equal((await mine.status()).state, "idle");
  await mine.close();
  await assert.rejects(mine.status(), (e: unknown) => e instanceof WebSocketClosedError && e.closeCode === 1000 && /this client closed/.test(e.message));

  // Closed by the runtime: shutdown ends the stream with its final event, then closes with 1001.
  const s = new Setup("ws-shutdown");
  const other = await startHttp(s, "echo-ts");
  const c = connectWebSocket({ url: other.url, token: other.token });
  try {
    const stream = c.events();
    await stream.ready;
    const kinds: string[] = [];
    const reading = (async () => {
      for await (const ev of stream) kinds.push(ev.event.type);
    })();
    assert.deepEqual(await c.shutdown(), { shutting_down: true });
    await reading;
    assert.equal(kinds.at(-1), "shutting_down");
    const closed = await (c.transport as WebSocketTransport).closed;
    await assert.rejects(c.status(), (e: unknown) => {
      assert.equal(e, closed, "every later call fails with the close error");
      assert.ok(e instanceof WebSocketClosedError, String(e));
      assert.equal(e.closeCode, 1001);
      assert.match(e.message, /code 1001, going away/);
      assert.match(e.message, /the runtime is shutting down/);
      return true;
    });
  } finally {
    await c.close();
    await other.stop();
    s.cleanup();
  }
});
