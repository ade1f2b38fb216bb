// Bad input on the agent's stdin, written raw (no SDK): each line gets its JSON-RPC error, valid
// against ACP's schema, and the connection goes on.

import { test } from "node:test";
import assert from "node:assert/strict";
import { startAgent, sendRaw, nextMessage, root, children } from "../harness.mjs";

/** Starts an agent, runs `op`, ends stdin and checks the exit and every line written. */
async function withAgent(op) {
  const agent = startAgent(["--runner", "echo"]);
  try {
    await op(agent);
  } finally {
    agent.child.stdin.end();
  }
  const exit = await agent.exited;
  assert.equal(exit.code, 0, agent.stderr);
  assert.deepEqual(agent.violations, [], "every line the agent wrote is valid against ACP's schema");
  return agent;
}

const init = { jsonrpc: "2.0", id: "init", method: "initialize", params: { protocolVersion: 1 } };

test("requests before initialize are refused (-32600); notifications before it are ignored", async () => {
  await withAgent(async (agent) => {
    sendRaw(agent, { jsonrpc: "2.0", method: "session/cancel", params: { sessionId: "x" } });
    sendRaw(agent, { jsonrpc: "2.0", id: 1, method: "session/new", params: { cwd: root, mcpServers: [] } });
    const refused = await nextMessage(agent, (m) => m.id === 1);
    assert.equal(refused.error.code, -32600);
    assert.equal(refused.error.data.code, "invalid_request");
    sendRaw(agent, init, { jsonrpc: "2.0", id: 2, method: "session/new", params: { cwd: root, mcpServers: [] } });
    assert.equal((await nextMessage(agent, (m) => m.id === "init")).result.protocolVersion, 1);
    assert.ok((await nextMessage(agent, (m) => m.id === 2)).result.sessionId);
    assert.equal(agent.lines.length, 3, "the early notification got no answer");
  });
});

test("invalid JSON is -32700 with id null, an array -32600 with id null, a non-object -32600; the connection goes on", async () => {
  await withAgent(async (agent) => {
    sendRaw(agent, init);
    await nextMessage(agent, (m) => m.id === "init");
    sendRaw(agent, '{"jsonrpc":"2.0","id":5,"method":', "[]", '[{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":1}}]', "42", '"text"');
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await nextMessage(agent, (m) => "error" in m && m.id === null));
    assert.deepEqual(
      answers.map((a) => [a.error.code, a.error.data.code]),
      [
        [-32700, "parse_error"],
        [-32600, "invalid_request"],
        [-32600, "invalid_request"],
        [-32600, "invalid_request"],
        [-32600, "invalid_request"],
      ],
    );
    sendRaw(agent, { jsonrpc: "2.0", id: 7, method: "_openagents/status" });
    assert.equal((await nextMessage(agent, (m) => m.id === 7)).result.state, "idle");
  });
});

test("messages that are not JSON-RPC 2.0: no jsonrpc, a bad id, a non-string method", async () => {
  await withAgent(async (agent) => {
    sendRaw(agent, init);
    await nextMessage(agent, (m) => m.id === "init");
    sendRaw(agent, { id: 8, method: "initialize", params: { protocolVersion: 1 } });
    assert.equal((await nextMessage(agent, (m) => m.id === 8)).error.code, -32600);
    sendRaw(agent, { jsonrpc: "2.0", id: { an: "object" }, method: "initialize", params: { protocolVersion: 1 } });
    assert.equal((await nextMessage(agent, (m) => m.id === null)).error.code, -32600);
    sendRaw(agent, { jsonrpc: "2.0", id: 9, method: 12 });
    assert.equal((await nextMessage(agent, (m) => m.id === 9)).error.code, -32600);
    sendRaw(agent, { jsonrpc: "2.0", id: 10, method: "session/prompt", params: { prompt: "not a list" } });
    assert.equal((await nextMessage(agent, (m) => m.id === 10)).error.code, -32602);
  });
});

test("unknown methods are -32601 (authenticate, session/delete included: not advertised); unknown notifications are ignored; session/load with bad params is -32602", async () => {
  await withAgent(async (agent) => {
    sendRaw(agent, init);
    await nextMessage(agent, (m) => m.id === "init");
    sendRaw(agent, { jsonrpc: "2.0", method: "_editor/something", params: {} });
    for (const [id, method] of [
      [11, "session/delete"],
      [12, "authenticate"],
      [13, "no/such/method"],
      [14, "fs/read_text_file"],
    ]) {
      sendRaw(agent, { jsonrpc: "2.0", id, method, params: {} });
      const a = await nextMessage(agent, (m) => m.id === id);
      assert.equal(a.error.code, -32601, method);
      assert.equal(a.error.data.code, "unknown_method");
    }
    assert.equal(agent.lines.length, 5, "the unknown notification got no answer");
    sendRaw(agent, { jsonrpc: "2.0", id: 15, method: "session/load", params: {} });
    const bad = await nextMessage(agent, (m) => m.id === 15);
    assert.equal(bad.error.code, -32602, JSON.stringify(bad));
    assert.ok(bad.error.data.details.violations.length > 0, "the schema's violations are in the error's details");
  });
});

test("an oversized line (past SERVER_MAX_LINE_BYTES) gets its error and the connection goes on", async () => {
  await withAgent(async (agent) => {
    sendRaw(agent, init);
    await nextMessage(agent, (m) => m.id === "init");
    const big = 16 * 1024 * 1024 + 1;
    const line = '{"jsonrpc":"2.0","id":15,"method":"session/new","params":{"cwd":"/' + "a".repeat(big) + '","mcpServers":[]}}';
    await new Promise((resolve, reject) => agent.child.stdin.write(line + "\n", (e) => (e ? reject(e) : resolve())));
    const tooBig = await nextMessage(agent, (m) => "error" in m && m.id === null, 30000);
    assert.equal(tooBig.error.data.code, "frame_too_large");
    sendRaw(agent, { jsonrpc: "2.0", id: 16, method: "session/new", params: { cwd: root, mcpServers: [] } });
    assert.ok((await nextMessage(agent, (m) => m.id === 16)).result.sessionId, "the next line is served");
  });
});

test("responses to ids the agent never used are ignored", async () => {
  await withAgent(async (agent) => {
    sendRaw(agent, init);
    await nextMessage(agent, (m) => m.id === "init");
    sendRaw(agent, { jsonrpc: "2.0", id: 999, result: { outcome: { outcome: "selected", optionId: "approve" } } }, { jsonrpc: "2.0", id: "zz", error: { code: 1, message: "x" } });
    sendRaw(agent, { jsonrpc: "2.0", id: 17, method: "_openagents/status" });
    await nextMessage(agent, (m) => m.id === 17);
    assert.equal(agent.lines.length, 2);
  });
});

test("an editor that stops reading: progress the pump could not keep is announced as dropped, the result still arrives, and the answer comes last", async () => {
  await withAgent(async (agent) => {
    sendRaw(agent, init, { jsonrpc: "2.0", id: 20, method: "session/new", params: { cwd: root, mcpServers: [] } });
    await nextMessage(agent, (m) => m.id === "init");
    const { result } = await nextMessage(agent, (m) => m.id === 20);
    // Stop reading stdout, then run a turn of 20,000 progress events (far past the runtime's
    // 1024-event broadcast and every buffer on the way out).
    agent.child.stdout.pause();
    const task = Array.from({ length: 20000 }, () => "w").join(" ");
    sendRaw(agent, { jsonrpc: "2.0", id: 21, method: "session/prompt", params: { sessionId: result.sessionId, prompt: [{ type: "text", text: task }] } });
    // Wait (bounded) until the runner has started and ended: the turn is over, its events published.
    let seen = false;
    for (let i = 0; i < 600; i++) {
      const running = children(agent.child.pid).some((c) => c.cmd.includes("openagents-runner-echo"));
      if (running) seen = true;
      if (seen && !running) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(seen, "the echo runner ran");
    agent.child.stdout.resume();
    const answer = await nextMessage(agent, (m) => m.id === 21, 60000);
    assert.equal(answer.result?.stopReason, "end_turn", JSON.stringify(answer));
    const updates = agent.lines.filter((m) => m.method === "session/update").map((m) => m.params.update);
    const thoughts = updates.filter((u) => u.sessionUpdate === "agent_thought_chunk");
    assert.ok(thoughts.length < 20000, `some progress was dropped (${thoughts.length} thoughts)`);
    assert.ok(thoughts.some((u) => /progress events were dropped/.test(u.content.text)), "the drop is announced");
    const results = updates.filter((u) => u.sessionUpdate === "agent_message_chunk");
    assert.equal(results.length, 1);
    assert.equal(results[0].content.text, task);
    const last = agent.lines.findLastIndex((m) => m.method === "session/update");
    assert.ok(agent.lines.indexOf(answer) > last, "no update trails the answer");
  });
});
