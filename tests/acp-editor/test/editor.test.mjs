// `openagents acp` driven by the official ACP TypeScript SDK, as an editor drives it. Every test
// ends by checking that every line the agent wrote was valid against ACP's published schema.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { withClient, initialize, newSession, prompt, check, root, alive, children, acp, startAgent, sendRaw, nextMessage, operatorDir } from "../harness.mjs";

const ALL = ["--runner", "echo", "--runner", "ask", "--runner", "hold", "--runner", "fails"];

function assertValid(agent) {
  assert.deepEqual(agent.violations, [], "every message the agent wrote is valid against ACP's schema");
  assert.ok(agent.lines.length > 0, "the agent wrote something");
}

/** The index of the agent's response to the client's request `id`'s prompt, and of its updates. */
function orderOf(agent, sessionId) {
  const updates = [];
  let response = -1;
  agent.lines.forEach((m, i) => {
    if (m.method === "session/update" && m.params.sessionId === sessionId) updates.push(i);
    if (m.method === "session/request_permission" && m.params.sessionId === sessionId) updates.push(i);
    if (("result" in m && m.result && "stopReason" in m.result) || ("error" in m && agent.clientRequests.get(JSON.stringify(m.id)) === "session/prompt")) response = i;
  });
  return { updates, response };
}

const kinds = (updates, sessionId) => updates.filter((u) => u.sessionId === sessionId).map((u) => u.update.sessionUpdate);

test("an echo turn streams progress as thought chunks and the result as one message chunk, then end_turn", async () => {
  const { result, agent, updates } = await withClient(["--runner", "echo"], async (ctx) => {
    await initialize(ctx);
    const { sessionId } = await newSession(ctx);
    const r = await prompt(ctx, sessionId, "hello world");
    return { sessionId, r };
  });
  const { sessionId, r } = result;
  assert.equal(r.ok?.stopReason, "end_turn", JSON.stringify(r.err ?? r.ok));
  const mine = updates.filter((u) => u.sessionId === sessionId).map((u) => u.update);
  const thoughts = mine.filter((u) => u.sessionUpdate === "agent_thought_chunk").map((u) => u.content.text);
  const messages = mine.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text);
  assert.deepEqual(thoughts, ["hello", " world"]);
  assert.deepEqual(messages, ["hello world"]);
  // The session id is the conversation, a valid Turn id.
  assert.match(sessionId, /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/);
  // Nothing trails the response.
  const { updates: u, response } = orderOf(agent, sessionId);
  assert.ok(response > 0 && u.length === 3 && u.every((i) => i < response), `updates at ${u}, response at ${response}`);
  assertValid(agent);
});

test("any registered runner: an ACP agent installed as a runner (protocol = \"acp\") serves an editor's turn, approvals included", async () => {
  const asked = [];
  const { result, agent, updates } = await withClient(
    [...ALL, "--runner", "inner"],
    async (ctx) => {
      await initialize(ctx);
      const { sessionId } = await newSession(ctx, { runner: "inner" });
      return { sessionId, plain: await prompt(ctx, sessionId, "hello inner"), ask: await prompt(ctx, sessionId, "ask to edit") };
    },
    {
      handlers: {
        requestPermission: (params) => {
          asked.push(params);
          return { outcome: { outcome: "selected", optionId: params.options.find((o) => o.kind === "allow_once").optionId } };
        },
      },
    },
  );
  assert.equal(result.plain.ok?.stopReason, "end_turn", JSON.stringify(result.plain));
  assert.equal(result.ask.ok?.stopReason, "end_turn", JSON.stringify(result.ask));
  const messages = updates.filter((u) => u.sessionId === result.sessionId && u.update.sessionUpdate === "agent_message_chunk").map((u) => u.update.content.text);
  assert.deepEqual(messages, ["inner agent: hello inner", "inner agent: ask to edit (yes)"]);
  assert.equal(asked.length, 1, "the inner agent's permission request reached the editor");
  assertValid(agent);
});

test("version negotiation: any asked version is answered with 1, with only what we support and our digest in _meta", async () => {
  const { result, agent } = await withClient(["--runner", "echo"], async (ctx) => {
    const asked = [];
    for (const v of [65535, 0, 1, 2]) asked.push(await ctx.request(acp.methods.agent.initialize, { protocolVersion: v }));
    return asked;
  });
  for (const r of result) {
    assert.equal(r.protocolVersion, 1);
    assert.equal(r.agentCapabilities.loadSession, true);
    assert.deepEqual(r.agentCapabilities.promptCapabilities, { image: false, audio: false, embeddedContext: false });
    assert.deepEqual(r.agentCapabilities.mcpCapabilities, { http: false, sse: false });
    assert.deepEqual(r.agentCapabilities.sessionCapabilities, { close: {}, list: {}, resume: {} });
    assert.equal(r._meta["openagents/maxSessions"], 256);
    assert.deepEqual(r.authMethods, []);
    assert.match(r._meta["openagents/protocolVersion"], /^\d+\.\d+\.\d+$/);
    assert.match(r._meta["openagents/schemaDigest"], /^[0-9a-f]{64}$/);
  }
  assertValid(agent);
});

test("an approval the editor allows: a tool_call card with the full prompt, request_permission with allow_once/reject_once, then end_turn", async () => {
  const asked = [];
  const { result, agent, updates } = await withClient(
    ALL,
    async (ctx) => {
      await initialize(ctx);
      const { sessionId } = await newSession(ctx, { runner: "ask" });
      return { sessionId, r: await prompt(ctx, sessionId, "write the file") };
    },
    {
      handlers: {
        requestPermission: (params) => {
          asked.push(params);
          return { outcome: { outcome: "selected", optionId: params.options.find((o) => o.kind === "allow_once").optionId } };
        },
      },
    },
  );
  const { sessionId, r } = result;
  assert.equal(r.ok?.stopReason, "end_turn", JSON.stringify(r.err ?? r.ok));
  assert.equal(asked.length, 1);
  assert.deepEqual(asked[0].options.map((o) => o.kind), ["allow_once", "reject_once"]);
  const card = updates.find((u) => u.update.sessionUpdate === "tool_call").update;
  assert.equal(card.content[0].content.text, "May I do this: write the file?");
  assert.equal(card.status, "pending");
  assert.equal(asked[0].toolCall.toolCallId, card.toolCallId);
  const closed = updates.filter((u) => u.update.sessionUpdate === "tool_call_update").map((u) => u.update.status);
  assert.deepEqual(closed, ["completed"]);
  const message = updates.find((u) => u.update.sessionUpdate === "agent_message_chunk").update.content.text;
  assert.equal(message, "approved: write the file");
  assert.deepEqual(kinds(updates, sessionId), ["agent_thought_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]);
  assertValid(agent);
});

test("an approval the editor rejects is denied: the card fails and the runner's failure is a typed error", async () => {
  const { result, agent, updates } = await withClient(
    ALL,
    async (ctx) => {
      await initialize(ctx);
      const { sessionId } = await newSession(ctx, { runner: "ask" });
      return prompt(ctx, sessionId, "delete everything");
    },
    { handlers: { requestPermission: (params) => ({ outcome: { outcome: "selected", optionId: params.options.find((o) => o.kind === "reject_once").optionId } }) } },
  );
  assert.equal(result.err?.code, -32007, JSON.stringify(result.ok ?? result.err));
  assert.equal(result.err.data.code, "runner_failed");
  assert.match(result.err.data.message, /denied: delete everything/);
  assert.deepEqual(updates.filter((u) => u.update.sessionUpdate === "tool_call_update").map((u) => u.update.status), ["failed"]);
  assertValid(agent);
});

test("an unknown option, a cancelled outcome and an error answer all deny (and an error is no reason to stop asking)", async () => {
  const answers = [
    () => ({ outcome: { outcome: "selected", optionId: "sure-why-not" } }),
    () => ({ outcome: { outcome: "cancelled" } }),
    () => {
      throw new Error("the editor's dialog crashed");
    },
    (params) => ({ outcome: { outcome: "selected", optionId: params.options[0].optionId } }),
  ];
  const { result, agent } = await withClient(
    ALL,
    async (ctx) => {
      await initialize(ctx);
      const { sessionId } = await newSession(ctx, { runner: "ask" });
      const out = [];
      for (const task of ["one", "two", "three", "four"]) out.push(await prompt(ctx, sessionId, task));
      return out;
    },
    { handlers: { requestPermission: (params) => answers.shift()(params) } },
  );
  for (const r of result.slice(0, 3)) assert.equal(r.err?.data?.code, "runner_failed", JSON.stringify(r));
  assert.equal(result[3].ok?.stopReason, "end_turn", "asked again after an error, and the allow approves");
  assert.equal(agent.lines.filter((m) => m.method === "session/request_permission").length, 4);
  assertValid(agent);
});

test("stdin EOF while an approval waits for the editor denies it, answers the prompt and exits 0", async () => {
  const agent = startAgent(ALL);
  sendRaw(agent, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } });
  await nextMessage(agent, (m) => m.id === 1);
  sendRaw(agent, { jsonrpc: "2.0", id: 2, method: "session/new", params: { cwd: root, mcpServers: [], _meta: { "openagents/runner": "ask" } } });
  const { result } = await nextMessage(agent, (m) => m.id === 2);
  sendRaw(agent, { jsonrpc: "2.0", id: 3, method: "session/prompt", params: { sessionId: result.sessionId, prompt: [{ type: "text", text: "may I" }] } });
  await nextMessage(agent, (m) => m.method === "session/request_permission");
  const runner = children(agent.child.pid).find((c) => c.cmd.includes("openagents-runner-ask"));
  agent.child.stdin.end();
  const answer = await nextMessage(agent, (m) => m.id === 3);
  assert.equal((await agent.exited).code, 0);
  assert.ok(answer.error, "a failure, never a success");
  assert.ok(["interrupted", "runner_failed"].includes(answer.error.data.code), JSON.stringify(answer));
  const card = agent.lines.filter((m) => m.method === "session/update" && m.params.update.sessionUpdate === "tool_call_update").map((m) => m.params.update.status);
  assert.deepEqual(card, ["failed"]);
  assert.ok(runner && !alive(runner.pid), "no runner process is left");
  assertValid(agent);
});

test("a client that cannot answer permission requests (method not found) is denied at once afterwards, without being asked again", async () => {
  const { result, agent } = await withClient(ALL, async (ctx) => {
    await initialize(ctx);
    const { sessionId } = await newSession(ctx, { runner: "ask" });
    return [await prompt(ctx, sessionId, "one"), await prompt(ctx, sessionId, "two")];
  });
  for (const r of result) assert.equal(r.err?.data?.code, "runner_failed", JSON.stringify(r));
  const asks = agent.lines.filter((m) => m.method === "session/request_permission");
  assert.equal(asks.length, 1, "asked once, then denied at once");
  const cards = agent.lines.filter((m) => m.method === "session/update" && m.params.update.sessionUpdate === "tool_call_update").map((m) => m.params.update.status);
  assert.deepEqual(cards, ["failed", "failed"]);
  assertValid(agent);
});

test("an approval nobody answers is denied at the timeout, and the agent withdraws its request with $/cancel_request", async () => {
  let signalled = false;
  const { result, agent } = await withClient(
    [...ALL, "--approval-timeout", "1"],
    async (ctx) => {
      await initialize(ctx);
      const { sessionId } = await newSession(ctx, { runner: "ask" });
      return prompt(ctx, sessionId, "wait forever");
    },
    {
      handlers: {
        requestPermission: (_params, signal) =>
          new Promise((resolve) => {
            signal.addEventListener("abort", () => {
              signalled = true;
              resolve({ outcome: { outcome: "cancelled" } });
            });
          }),
      },
    },
  );
  assert.equal(result.err?.data?.code, "runner_failed", JSON.stringify(result));
  const ask = agent.lines.find((m) => m.method === "session/request_permission");
  const withdrawn = agent.lines.find((m) => m.method === "$/cancel_request");
  assert.ok(withdrawn, "a $/cancel_request was sent");
  assert.equal(withdrawn.params.requestId, ask.id);
  assert.ok(signalled, "the SDK aborted the pending handler");
  assertValid(agent);
});

test("session/cancel during a turn answers cancelled, kills the runner, and the runtime takes the next turn", async () => {
  let runnerPid;
  const { result, agent, updates } = await withClient(ALL, async (ctx, agent, updates) => {
    await initialize(ctx);
    const held = await newSession(ctx, { runner: "hold" });
    const pending = prompt(ctx, held.sessionId, "a long job");
    await nextMessage(agent, (m) => m.method === "session/update" && m.params.update.sessionUpdate === "agent_thought_chunk");
    runnerPid = children(agent.child.pid).find((c) => c.cmd.includes("openagents-runner-hold"))?.pid;
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: held.sessionId });
    const cancelled = await pending;
    const echo = await newSession(ctx, { runner: "echo" });
    const next = await prompt(ctx, echo.sessionId, "still here");
    return { held: held.sessionId, cancelled, next };
  });
  assert.equal(result.cancelled.ok?.stopReason, "cancelled", JSON.stringify(result.cancelled));
  assert.equal(result.next.ok?.stopReason, "end_turn", JSON.stringify(result.next));
  assert.ok(runnerPid, "the hold runner was running");
  assert.equal(alive(runnerPid), false, "the runner's process is gone");
  assert.deepEqual(kinds(updates, result.held), ["agent_thought_chunk"]);
  assertValid(agent);
});

let lateCancel = async () => {};
test("a late cancel (its turn already ended) does not touch another session's running turn", async () => {
  const { result, agent } = await withClient(
    ALL,
    async (ctx) => {
      await initialize(ctx);
      const a = await newSession(ctx, { runner: "echo" });
      const first = await prompt(ctx, a.sessionId, "first");
      const b = await newSession(ctx, { runner: "ask" });
      lateCancel = () => ctx.notify(acp.methods.agent.session.cancel, { sessionId: a.sessionId });
      const second = await prompt(ctx, b.sessionId, "second");
      const third = await prompt(ctx, a.sessionId, "third");
      return { first, second, third };
    },
    {
      handlers: {
        // The late cancel for A goes out while B's turn waits on this answer.
        requestPermission: async (params) => {
          await lateCancel();
          return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
        },
      },
    },
  );
  assert.equal(result.first.ok?.stopReason, "end_turn");
  assert.equal(result.second.ok?.stopReason, "end_turn", JSON.stringify(result.second));
  assert.equal(result.third.ok?.stopReason, "end_turn", "the session the late cancel named still works");
  assertValid(agent);
});

test("a cancel sent right behind its prompt always answers cancelled, also when the turn finished in the race", async () => {
  const { result, agent } = await withClient(ALL, async (ctx) => {
    await initialize(ctx);
    const { sessionId } = await newSession(ctx, { runner: "echo" });
    const out = [];
    for (let i = 0; i < 5; i++) {
      const pending = prompt(ctx, sessionId, `quick ${i}`);
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      out.push(await pending);
    }
    out.push(await prompt(ctx, sessionId, "after the cancels"));
    return out;
  });
  for (const r of result.slice(0, 5)) assert.equal(r.ok?.stopReason, "cancelled", JSON.stringify(r));
  assert.equal(result[5].ok?.stopReason, "end_turn");
  assertValid(agent);
});

test("one turn at a time: another session's prompt waits its turn, a second prompt on a busy session is refused", async () => {
  const { result, agent } = await withClient(ALL, async (ctx, agent) => {
    await initialize(ctx);
    const held = await newSession(ctx, { runner: "hold" });
    const other = await newSession(ctx, { runner: "echo" });
    const first = prompt(ctx, held.sessionId, "hold on");
    await nextMessage(agent, (m) => m.method === "session/update" && m.params.sessionId === held.sessionId);
    const waiting = prompt(ctx, other.sessionId, "my turn next");
    const refused = await prompt(ctx, held.sessionId, "me too");
    // The waiting prompt has produced nothing yet: the hold turn still runs.
    const early = agent.lines.filter((m) => m.method === "session/update" && m.params.sessionId === other.sessionId).length;
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: held.sessionId });
    return { first: await first, waiting: await waiting, refused, early };
  });
  assert.equal(result.refused.err?.code, -32602, JSON.stringify(result.refused));
  assert.equal(result.early, 0);
  assert.equal(result.first.ok?.stopReason, "cancelled");
  assert.equal(result.waiting.ok?.stopReason, "end_turn");
  assertValid(agent);
});

test("the wait for the turn slot is bounded: past 64 waiting prompts the next is busy (-32003)", async () => {
  const { result, agent } = await withClient(ALL, async (ctx, agent) => {
    await initialize(ctx);
    const held = await newSession(ctx, { runner: "hold" });
    const first = prompt(ctx, held.sessionId, "hold on");
    await nextMessage(agent, (m) => m.method === "session/update" && m.params.sessionId === held.sessionId);
    const sessions = [];
    for (let i = 0; i < 65; i++) sessions.push((await newSession(ctx)).sessionId);
    const waiting = sessions.slice(0, 64).map((s) => prompt(ctx, s, "wait"));
    const busy = await prompt(ctx, sessions[64], "one too many");
    for (const s of sessions.slice(0, 64)) await ctx.notify(acp.methods.agent.session.cancel, { sessionId: s });
    const answers = await Promise.all(waiting);
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: held.sessionId });
    return { busy, answers, first: await first };
  });
  assert.equal(result.busy.err?.code, -32003, JSON.stringify(result.busy));
  assert.equal(result.busy.err.data.code, "busy");
  assert.equal(result.busy.err.data.retryable, true);
  assert.ok(result.answers.every((a) => a.ok?.stopReason === "cancelled"));
  assert.equal(result.first.ok?.stopReason, "cancelled");
  assertValid(agent);
});

test("a queued prompt that is cancelled answers cancelled at once and never runs", async () => {
  const { result, agent } = await withClient(ALL, async (ctx, agent) => {
    await initialize(ctx);
    const held = await newSession(ctx, { runner: "hold" });
    const queued = await newSession(ctx, { runner: "echo" });
    const first = prompt(ctx, held.sessionId, "hold on");
    await nextMessage(agent, (m) => m.method === "session/update" && m.params.sessionId === held.sessionId);
    const waiting = prompt(ctx, queued.sessionId, "never runs");
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: queued.sessionId });
    const w = await waiting;
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: held.sessionId });
    await first;
    const status = await ctx.request("_openagents/status", {});
    return { w, queued: queued.sessionId, status };
  });
  assert.equal(result.w.ok?.stopReason, "cancelled");
  assert.equal(agent.lines.filter((m) => m.method === "session/update" && m.params.sessionId === result.queued).length, 0);
  assert.equal(result.status.counters.submitted, 1, "only the held turn was ever submitted");
  assertValid(agent);
});

test("an unknown session is -32002 with the session id; a cancel for one is ignored", async () => {
  const { result, agent } = await withClient(["--runner", "echo"], async (ctx) => {
    await initialize(ctx);
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: "no-such-session" });
    const r = await prompt(ctx, "no-such-session", "hello");
    const { sessionId } = await newSession(ctx);
    return { r, after: await prompt(ctx, sessionId, "still fine") };
  });
  assert.equal(result.r.err?.code, -32002);
  assert.equal(result.r.err.data.sessionId, "no-such-session");
  assert.equal(result.r.err.data.code, "invalid_params");
  assert.equal(result.after.ok?.stopReason, "end_turn");
  assertValid(agent);
});

test("session/close (advertised as sessionCapabilities.close): the session's ACP runner process ends, and a prompt to it is an unknown session's -32002", async () => {
  const { result, agent } = await withClient([...ALL, "--runner", "inner"], async (ctx, agent) => {
    await initialize(ctx);
    const { sessionId } = await newSession(ctx, { runner: "inner" });
    const first = await prompt(ctx, sessionId, "hello inner");
    const inner = children(agent.child.pid).filter((c) => c.cmd.includes("inner-agent.mjs"));
    const closed = await ctx.request(acp.methods.agent.session.close, { sessionId });
    const gone = inner.map((c) => alive(c.pid));
    const after = await prompt(ctx, sessionId, "hello again");
    const unknown = await prompt(ctx, "no-such-session", "hello");
    // Closing it again: -32002 on the wire, which the SDK takes as success (as ACP recommends:
    // the end state is the same).
    const twice = await ctx.request(acp.methods.agent.session.close, { sessionId });
    return { first, inner, closed, gone, after, unknown, twice, sessionId };
  });
  assert.equal(result.first.ok?.stopReason, "end_turn", JSON.stringify(result.first));
  assert.equal(result.inner.length, 1, "the inner agent's process was kept after its turn");
  assert.deepEqual(result.closed, {});
  assert.deepEqual(result.gone, [false], "its process is gone once session/close has answered");
  assert.equal(result.after.err?.code, -32002, JSON.stringify(result.after));
  assert.equal(result.after.err.data.sessionId, result.sessionId);
  assert.equal(result.after.err.data.code, result.unknown.err.data.code);
  assert.equal(result.after.err.message.replace(result.sessionId, "S"), result.unknown.err.message.replace("no-such-session", "S"));
  assert.deepEqual(result.twice, {});
  const closes = agent.lines.filter((m) => "id" in m && !("method" in m) && agent.clientRequests.get(JSON.stringify(m.id)) === "session/close");
  assert.deepEqual(closes.map((m) => m.error?.code ?? "ok"), ["ok", -32002]);
  assertValid(agent);
});

test("session/close during a turn answers the prompt cancelled, then the close; the runner's process is gone", async () => {
  const { result, agent } = await withClient(ALL, async (ctx, agent) => {
    await initialize(ctx);
    const held = await newSession(ctx, { runner: "hold" });
    const pending = prompt(ctx, held.sessionId, "a long job");
    await nextMessage(agent, (m) => m.method === "session/update" && m.params.sessionId === held.sessionId);
    const runner = children(agent.child.pid).find((c) => c.cmd.includes("openagents-runner-hold"));
    const closed = await ctx.request(acp.methods.agent.session.close, { sessionId: held.sessionId });
    return { closed, cancelled: await pending, runner, alive: runner && alive(runner.pid), after: await prompt(ctx, held.sessionId, "again") };
  });
  assert.deepEqual(result.closed, {});
  assert.equal(result.cancelled.ok?.stopReason, "cancelled", JSON.stringify(result.cancelled));
  assert.ok(result.runner, "the hold runner was running");
  assert.equal(result.alive, false, "the runner's process is gone");
  assert.equal(result.after.err?.code, -32002);
  const answers = agent.lines.map((m, i) => [m, i]).filter(([m]) => "id" in m && !("method" in m));
  const promptAt = answers.find(([m]) => m.result?.stopReason === "cancelled")[1];
  const closeAt = answers.find(([m]) => m.result && Object.keys(m.result).length === 0)[1];
  assert.ok(promptAt < closeAt, "the prompt's answer comes before the close's");
  assertValid(agent);
});

test("a runner failure is a JSON-RPC error whose data is our RuntimeSubmitError, never a stop reason", async () => {
  const { result, agent } = await withClient(ALL, async (ctx) => {
    await initialize(ctx);
    const { sessionId } = await newSession(ctx, { runner: "fails" });
    return prompt(ctx, sessionId, "try");
  });
  assert.equal(result.err?.code, -32007, JSON.stringify(result));
  assert.deepEqual(Object.keys(result.err.data).sort().filter((k) => k !== "details"), ["code", "message", "retryable"]);
  assert.equal(result.err.data.code, "runner_failed");
  assert.equal(result.err.data.retryable, true);
  assertValid(agent);
});

test("session/new: a relative cwd is refused like Turn.cwd; client MCP servers are ignored and said so (_meta, notice after the response)", async () => {
  const { result, agent } = await withClient(["--runner", "echo"], async (ctx) => {
    await initialize(ctx, { clientCapabilities: { session: { notices: {} } } });
    const relative = await newSession(ctx, { cwd: "relative/path" }).catch((e) => e);
    const other = await ctx.request(acp.methods.agent.session.new, { cwd: root, mcpServers: [], _meta: { "openagents/runner": "not-mine" } }).catch((e) => e);
    // Present but not a runner's name: refused, never the default runner.
    const unnamed = [];
    for (const runner of [null, 7, ["echo"]]) {
      unnamed.push(await ctx.request(acp.methods.agent.session.new, { cwd: root, mcpServers: [], _meta: { "openagents/runner": runner } }).catch((e) => e));
    }
    const mcp = await newSession(ctx, { mcpServers: [{ name: "files", command: "/usr/bin/true", args: [], env: [] }, { type: "http", name: "web", url: "http://127.0.0.1:1/", headers: [] }] });
    return { relative, other, unnamed, mcp };
  });
  assert.equal(result.relative.code, -32602);
  assert.equal(result.relative.data.details.violations[0].pointer, "/cwd");
  assert.equal(result.other.code, -32602);
  for (const e of result.unnamed) {
    assert.equal(e.code, -32602, JSON.stringify(e));
    assert.match(e.message, /must be a string naming one of this agent's runners/);
  }
  assert.deepEqual(result.mcp._meta["openagents/ignoredMcpServers"], ["files", "web"]);
  const response = agent.lines.findIndex((m) => m.result?.sessionId === result.mcp.sessionId);
  const notice = agent.lines.findIndex((m) => m.method === "session/update" && m.params.update.sessionUpdate === "notice");
  assert.ok(response >= 0 && notice > response, "the notice comes after the session/new response");
  assert.match(agent.stderr, /ignored 2 MCP server/);
  assertValid(agent);
});

test("prompt content: text and resource links are flattened into the task; images are refused", async () => {
  const { result, agent, updates } = await withClient(["--runner", "echo"], async (ctx) => {
    await initialize(ctx);
    const { sessionId } = await newSession(ctx);
    const ok = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "look at" }, { type: "resource_link", uri: "file:///tmp/a.txt", name: "a.txt" }] });
    const image = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "image", data: "AAAA", mimeType: "image/png" }] }).catch((e) => e);
    const empty = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [] }).catch((e) => e);
    return { ok, image, empty };
  });
  assert.equal(result.ok.stopReason, "end_turn");
  assert.equal(updates.find((u) => u.update.sessionUpdate === "agent_message_chunk").update.content.text, "look at\n\n[a.txt](file:///tmp/a.txt)");
  assert.equal(result.image.code, -32602);
  assert.equal(result.empty.code, -32602);
  assertValid(agent);
});

test("stdin EOF during a turn: the prompt is answered, the runner's process is gone, and the agent exits 0", async () => {
  const agent = startAgent(ALL);
  sendRaw(agent, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } });
  await nextMessage(agent, (m) => m.id === 1);
  sendRaw(agent, { jsonrpc: "2.0", id: 2, method: "session/new", params: { cwd: root, mcpServers: [], _meta: { "openagents/runner": "hold" } } });
  const { result } = await nextMessage(agent, (m) => m.id === 2);
  sendRaw(agent, { jsonrpc: "2.0", id: 3, method: "session/prompt", params: { sessionId: result.sessionId, prompt: [{ type: "text", text: "hold" }] } });
  await nextMessage(agent, (m) => m.method === "session/update");
  const runner = children(agent.child.pid).find((c) => c.cmd.includes("openagents-runner-hold"));
  assert.ok(runner, "the runner runs");
  agent.child.stdin.end();
  const answer = await nextMessage(agent, (m) => m.id === 3);
  const exit = await agent.exited;
  assert.equal(exit.code, 0);
  assert.equal(answer.error?.code, -32006, JSON.stringify(answer));
  assert.equal(answer.error.data.code, "interrupted");
  assert.equal(alive(runner.pid), false, "no runner process is left");
  assert.deepEqual(children(agent.child.pid), []);
  assertValid(agent);
});

test("the committed vectors of our ACP types are valid against ACP's schema", () => {
  const vectors = JSON.parse(readFileSync(join(import.meta.dirname, "..", "vectors.json"), "utf8"));
  assert.ok(vectors.length >= 10);
  for (const { def: name, value } of vectors) assert.deepEqual(check(name, value), [], `${name}: ${JSON.stringify(value)}`);
  // And the checker can fail: a stop reason ACP does not have.
  assert.notDeepEqual(check("PromptResponse", { stopReason: "error" }), []);
});

test("the operator gate: without [capabilities.server] enabled the agent refuses to start, and stdout stays empty", async () => {
  const agent = startAgent(["--runner", "echo"], { dir: operatorDir({ enabled: false }) });
  agent.child.stdin.end();
  const exit = await agent.exited;
  assert.equal(exit.code, 2);
  assert.equal(agent.lines.length, 0);
  assert.match(agent.stderr, /the server is off/);
});
