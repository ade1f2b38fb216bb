// Sessions that outlive the process: `openagents acp` on a durable store lists its sessions
// (`session/list`) and reopens one in a second process, as an editor reopens a thread: with
// `session/load`, replaying its history before it answers; with `session/resume`, without. Driven by the official ACP TypeScript SDK;
// every line either agent wrote is validated against ACP's published schema.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { withClient, initialize, newSession, prompt, root, acp, startAgent, sendRaw, nextMessage } from "../harness.mjs";

function assertValid(agent) {
  assert.deepEqual(agent.violations, [], "every message the agent wrote is valid against ACP's schema");
}

const attempt = (p) => p.then((ok) => ({ ok }), (err) => ({ err }));

/**
 * A store in a temporary folder with one session on it, made by a first `openagents acp` (a
 * prompt `text` run in it): `op(store, sessionId, first)` gets the `--store` arguments, the
 * session's id and the first process's `withClient` outcome; the folder goes afterwards.
 */
async function withStoredSession(text, op) {
  const storeDir = mkdtempSync(join(tmpdir(), "openagents-acp-store-"));
  const store = ["--store", `sqlite:${join(storeDir, "acp.db")}`];
  try {
    const first = await withClient(["--runner", "echo", ...store], async (ctx) => {
      await initialize(ctx);
      const { sessionId } = await newSession(ctx);
      const r = await prompt(ctx, sessionId, text);
      return { sessionId, r };
    });
    assert.equal(first.result.r.ok?.stopReason, "end_turn", JSON.stringify(first.result.r));
    await op(store, first.result.sessionId, first);
  } finally {
    rmSync(storeDir, { recursive: true, force: true });
  }
}

test("session/list and session/load across two processes on one store: the history replays before the answer, and a prompt continues the session", async () => {
  const storeDir = mkdtempSync(join(tmpdir(), "openagents-acp-store-"));
  const store = ["--store", `sqlite:${join(storeDir, "acp.db")}`];
  try {
    // The first editor: a session, an approval the editor allows, and a plain turn.
    const first = await withClient(["--runner", "echo", ...store], async (ctx) => {
      const init = await initialize(ctx);
      const { sessionId } = await newSession(ctx);
      const r = await prompt(ctx, sessionId, "hello world");
      return { init, sessionId, r };
    });
    assert.equal(first.result.init.agentCapabilities.loadSession, true);
    assert.deepEqual(first.result.init.agentCapabilities.sessionCapabilities, { close: {}, list: {}, resume: {} });
    assert.equal(first.result.r.ok?.stopReason, "end_turn", JSON.stringify(first.result.r));
    const sid = first.result.sessionId;
    const live = first.updates.filter((u) => u.sessionId === sid).map((u) => u.update);

    // The second editor, a new process on the same store.
    const second = await withClient(["--runner", "echo", ...store], async (ctx, agent, updates) => {
      await initialize(ctx);
      const list = await ctx.request(acp.methods.agent.session.list, {});
      const elsewhere = await ctx.request(acp.methods.agent.session.list, { cwd: "/no/such/folder" });
      const before = updates.length;
      const loaded = await ctx.request(acp.methods.agent.session.load, { sessionId: sid, cwd: root, mcpServers: [] });
      const replayed = updates.slice(before).filter((u) => u.sessionId === sid).map((u) => u.update);
      const again = await prompt(ctx, sid, "and again");
      const unknown = await attempt(ctx.request(acp.methods.agent.session.load, { sessionId: "no-such-session", cwd: root, mcpServers: [] }));
      const badCursor = await attempt(ctx.request(acp.methods.agent.session.list, { cursor: "not ours" }));
      const after = await ctx.request(acp.methods.agent.session.list, {});
      return { list, elsewhere, loaded, replayed, again, unknown, badCursor, after };
    });
    const r = second.result;
    const listed = r.list.sessions.find((s) => s.sessionId === sid);
    assert.ok(listed, `the first process's session is listed: ${JSON.stringify(r.list)}`);
    assert.equal(listed.cwd, root);
    assert.equal(listed.title, "hello world");
    assert.ok(!Number.isNaN(Date.parse(listed.updatedAt)), listed.updatedAt);
    assert.deepEqual(r.elsewhere.sessions, [], "a cwd no session ran in lists none");
    // The replay: the prompt as the user's message, then what the live session showed.
    assert.deepEqual(r.replayed[0], { sessionUpdate: "user_message_chunk", content: { type: "text", text: "hello world" }, messageId: r.replayed[0].messageId });
    assert.deepEqual(r.replayed.slice(1).map((u) => [u.sessionUpdate, u.content?.text]), live.map((u) => [u.sessionUpdate, u.content?.text]));
    // Every replayed update came before the answer to session/load.
    const lines = second.agent.lines;
    const answer = lines.findIndex((m) => "result" in m && second.agent.clientRequests.get(JSON.stringify(m.id)) === "session/load");
    const replayedAt = lines.map((m, i) => (m.method === "session/update" && m.params.sessionId === sid && i < answer ? i : -1)).filter((i) => i >= 0);
    assert.equal(replayedAt.length, r.replayed.length, `all ${r.replayed.length} replayed updates precede the answer at ${answer}`);
    // The session goes on: a prompt to it is a new turn of the same conversation.
    assert.equal(r.again.ok?.stopReason, "end_turn", JSON.stringify(r.again));
    assert.equal(r.unknown.err?.code, -32002, JSON.stringify(r.unknown));
    assert.equal(r.badCursor.err?.code, -32602, JSON.stringify(r.badCursor));
    assert.equal(r.after.sessions[0].sessionId, sid, "the continued session is now the most recently updated");
    assertValid(first.agent);
    assertValid(second.agent);
  } finally {
    rmSync(storeDir, { recursive: true, force: true });
  }
});

test("session/resume in a new process on the same store: the session answers without a replay, and a prompt continues it", async () => {
  await withStoredSession("remember this", async (store, sid, first) => {
    const second = await withClient(["--runner", "echo", ...store], async (ctx, agent, updates) => {
      await initialize(ctx);
      const before = updates.length;
      const resumed = await ctx.request(acp.methods.agent.session.resume, { sessionId: sid, cwd: root });
      const replayed = updates.slice(before).filter((u) => u.sessionId === sid);
      const again = await prompt(ctx, sid, "and go on");
      const unknown = await attempt(ctx.request(acp.methods.agent.session.resume, { sessionId: "no-such-session", cwd: root }));
      const relative = await attempt(ctx.request(acp.methods.agent.session.resume, { sessionId: sid, cwd: "relative/path" }));
      return { resumed, replayed, again, unknown, relative };
    });
    const r = second.result;
    assert.deepEqual(r.resumed, {}, JSON.stringify(r.resumed));
    assert.deepEqual(r.replayed, [], "session/resume replays nothing");
    assert.equal(r.again.ok?.stopReason, "end_turn", JSON.stringify(r.again));
    const text = second.updates.filter((u) => u.sessionId === sid && u.update.sessionUpdate === "agent_message_chunk").map((u) => u.update.content.text).join("");
    assert.match(text, /and go on/, "the resumed session ran the new prompt");
    assert.equal(r.unknown.err?.code, -32002, JSON.stringify(r.unknown));
    assert.equal(r.relative.err?.code, -32602, JSON.stringify(r.relative));
    assertValid(first.agent);
    assertValid(second.agent);
  });
});

test("a prompt pipelined right behind session/load or session/resume waits for the session and runs (it is no unknown session's)", async () => {
  await withStoredSession("first", async (store, sid) => {
    for (const method of ["session/load", "session/resume"]) {
      const agent = startAgent(["--runner", "echo", ...store]);
      try {
        const params = method === "session/load" ? { sessionId: sid, cwd: root, mcpServers: [] } : { sessionId: sid, cwd: root };
        // All three at once: the prompt is read while the session is still being reopened.
        sendRaw(
          agent,
          { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } },
          { jsonrpc: "2.0", id: 2, method, params },
          { jsonrpc: "2.0", id: 3, method: "session/prompt", params: { sessionId: sid, prompt: [{ type: "text", text: "right behind" }] } },
        );
        const reopened = await nextMessage(agent, (m) => m.id === 2);
        const answered = await nextMessage(agent, (m) => m.id === 3, 30000);
        assert.deepEqual(reopened.result, {}, `${method}: ${JSON.stringify(reopened)}`);
        assert.equal(answered.result?.stopReason, "end_turn", `${method}: ${JSON.stringify(answered)}`);
        const at = (id) => agent.lines.findIndex((m) => m.id === id && ("result" in m || "error" in m));
        assert.ok(at(2) < at(3), `${method}: the reopen is answered before the prompt`);
      } finally {
        agent.child.stdin.end();
        await agent.exited;
        rmSync(agent.dir, { recursive: true, force: true });
      }
      assert.deepEqual(agent.violations, [], `${method}: every message the agent wrote is valid against ACP's schema`);
    }
  });
});
