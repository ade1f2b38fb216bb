/**
 * The stdio transport: a real `openagents serve --stdio` child driving a real Node.js runner,
 * with events as `{"event": …}` notifications between responses.
 */

import assert from "node:assert/strict";
import { after, test } from "node:test";

import { InterruptedError, isKnownRuntimeEvent, OpenAgentsClient, RunnerNotFoundError, TransportError } from "@openagents/client";
import type { ServerEvent, Transport } from "@openagents/client";
import { connectStdio, StdioTransport } from "@openagents/client/node";

import { BIN, checkResumeAhead, Setup } from "./helpers.js";

const setup = new Setup("stdio");
after(() => setup.cleanup());

test("a turn over stdio, with its events and typed errors", async () => {
  // `serve` serves exactly the runners it names, the first the default.
  const client = connectStdio({ runner: "echo-ts", args: ["--runner", "behave"], bin: BIN, env: setup.env, cwd: setup.dir });
  try {
    assert.equal((await client.status()).state, "idle");
    const events: ServerEvent[] = [];
    const result = await client.runTurn({ task: "hello over stdio" }, { onEvent: (e) => events.push(e) });
    assert.equal(result.result, "hello over stdio");
    assert.deepEqual(
      events.map((e) => e.event.type),
      ["turn_started", "text", "text", "text", "turn_completed"],
    );
    // It says only that: neither the registry's runners nor its path.
    await assert.rejects(client.submit({ task: "x", runner: "missing" }), (e: unknown) => e instanceof RunnerNotFoundError && e.message === "unknown runner" && e.details?.known === undefined);
    // Requests run concurrently: a status answers while a submit is in flight.
    const slow = client.submit({ task: "words a b c", runner: "behave" });
    assert.equal(typeof (await client.status()).counters.submitted, "number");
    assert.equal((await slow).result, "words a b c");
  } finally {
    await client.close();
  }
});

test("aborting a submit over stdio interrupts the turn", async () => {
  const client = connectStdio({ runner: "behave", bin: BIN, env: setup.env, cwd: setup.dir });
  try {
    const controller = new AbortController();
    const stream = client.events();
    await stream.ready;
    const submitted = client.submit({ task: "hang" }, { signal: controller.signal });
    // The answer may come before the stream's last event: observe it at once.
    submitted.catch(() => undefined);
    for await (const ev of stream) {
      if (ev.event.type === "text") controller.abort();
      if (ev.event.type === "turn_failed") break;
    }
    await assert.rejects(submitted, (e: unknown) => e instanceof InterruptedError);
    assert.equal((await client.status()).counters.interrupted, 1);
  } finally {
    await client.close();
  }
});

for (const given of [undefined, "mine-1"]) {
  test(`an aborted submit interrupts only its own turn (assignment ${given === undefined ? "generated" : "given"})`, async () => {
    const inner = StdioTransport.spawn({ runner: "behave", bin: BIN, env: setup.env, cwd: setup.dir });
    const sent: [string, unknown][] = [];
    const recording: Transport = {
      where: inner.where,
      request: (method, params, options) => {
        sent.push([method, params]);
        return inner.request(method, params, options);
      },
      subscribe: (options) => inner.subscribe(options),
      close: () => inner.close(),
    };
    const client = new OpenAgentsClient(recording);
    try {
      const controller = new AbortController();
      const stream = client.events();
      await stream.ready;
      const submitted = client.submit(given === undefined ? { task: "hang" } : { task: "hang", assignment: given }, { signal: controller.signal });
      submitted.catch(() => undefined);
      let started = "";
      for await (const ev of stream) {
        if (isKnownRuntimeEvent(ev.event) && ev.event.type === "turn_started") started = ev.event.assignment;
        if (ev.event.type === "text") controller.abort();
        if (ev.event.type === "turn_failed") break;
      }
      await assert.rejects(submitted, (e: unknown) => e instanceof InterruptedError);
      if (given !== undefined) assert.equal(started, given);
      // The submit named its turn, and every interrupt names the same one.
      const submits = sent.filter(([m]) => m === "submit").map(([, p]) => p as { assignment?: string });
      const interrupts = sent.filter(([m]) => m === "interrupt").map(([, p]) => p);
      assert.equal(submits[0]?.assignment, started);
      assert.ok(interrupts.length >= 1, JSON.stringify(sent));
      for (const p of interrupts) assert.deepEqual(p, { assignment: started });
    } finally {
      await client.close();
    }
  });
}

test("events since a point are replayed through the subscribe method", async () => {
  const client = connectStdio({ runner: "echo-ts", bin: BIN, env: setup.env, cwd: setup.dir });
  try {
    await client.submit({ task: "one two" });
    const seqs: number[] = [];
    const stream = client.events({ since: 0 });
    await stream.ready;
    for await (const ev of stream) {
      seqs.push(ev.seq);
      if (ev.event.type === "turn_completed") break;
    }
    assert.deepEqual(seqs, [1, 2, 3, 4]);
  } finally {
    await client.close();
  }
});

test("a resume point ahead of the runtime gets a gap, then every event it holds, over stdio", async () => {
  const client = connectStdio({ runner: "echo-ts", bin: BIN, env: setup.env, cwd: setup.dir });
  try {
    await client.submit({ task: "one two" });
    await checkResumeAhead(client);
  } finally {
    await client.close();
  }
});

test("shutdown ends the runtime; later requests fail as transport errors", async () => {
  const transport = StdioTransport.spawn({ runner: "echo-ts", bin: BIN, env: setup.env, cwd: setup.dir });
  const { OpenAgentsClient } = await import("@openagents/client");
  const client = new OpenAgentsClient(transport);
  const stream = client.events();
  const kinds: string[] = [];
  const reading = (async () => {
    for await (const ev of stream) kinds.push(ev.event.type);
  })();
  assert.deepEqual(await client.shutdown(), { shutting_down: true });
  await reading;
  assert.deepEqual(kinds, ["shutting_down"]);
  // The transport ends the runtime's input once `shutdown` is answered, so the runtime exits.
  await assert.rejects(client.status(), (e: unknown) => e instanceof TransportError);
  if (transport.child.exitCode === null) await new Promise((r) => transport.child.once("exit", r));
  assert.equal(transport.child.exitCode, 0);
  await client.close();
});

test("OPENAGENTS_BIN names the binary; a runtime that cannot start is a transport error", async () => {
  const saved = process.env.OPENAGENTS_BIN;
  process.env.OPENAGENTS_BIN = BIN;
  try {
    const client = connectStdio({ runner: "echo-ts", env: setup.env, cwd: setup.dir });
    assert.equal((await client.status()).state, "idle");
    await client.close();
  } finally {
    if (saved === undefined) delete process.env.OPENAGENTS_BIN;
    else process.env.OPENAGENTS_BIN = saved;
  }
  const missing = connectStdio({ runner: "echo-ts", bin: "/nonexistent/openagents", env: setup.env });
  await assert.rejects(missing.status(), (e: unknown) => e instanceof TransportError && /cannot run the runtime/.test(e.message));
  await missing.close();
  // The operator has not enabled the server: the child says so, and the error quotes it.
  const off = new Setup("stdio-off", { enabled: false });
  try {
    const refused = connectStdio({ runner: "echo-ts", bin: BIN, env: off.env, cwd: off.dir });
    await assert.rejects(refused.status(), (e: unknown) => e instanceof TransportError && /the server is off/.test(e.message));
    await refused.close();
  } finally {
    off.cleanup();
  }
});
