// ACP agents as runners, end to end: the fake agents on the official SDKs behind the real
// `openagents run`, `openagents serve --http` (POST /rpc with the token), `serve --stdio` and the
// WebSocket (`/frontend/v2`, approvals answered and denied).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import WebSocket from "ws";

import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { BIN, PYTHON, ROOT, alive, events, fake, fields, python, run, serve, setup, until } from "../helpers.mjs";

const MAX_OUTPUT = 1048576;
const MAX_FRAME = 98304;

describe("openagents run", () => {
  let s;
  before(() => {
    // slowpoke's time limit must leave a cold Node start on a loaded machine time to get the
    // prompt (and say so) before it ends the turn.
    s = setup({ fake: fake(), py: python(), slowpoke: fake({ timeout_s: 5 }) });
  });
  after(() => s.cleanup());

  test("an agent that never answers ends its turn at the runner's time limit (timeout), its process group killed", async () => {
    const r = await run(s.env, s.dir, ["--json", "--runner", "slowpoke", "deaf"]);
    assert.equal(r.code, 1, r.err);
    const evs = events(r.out);
    const failed = evs.find((e) => e.type === "turn_failed");
    assert.equal(failed.error.code, "timeout");
    assert.match(failed.error.message, /longer than 5s/);
    const said = evs.find((e) => e.type === "text");
    assert.ok(said, `the agent never got the prompt within the time limit: ${JSON.stringify(evs)}`);
    const pid = Number(/pid=(\d+)/.exec(said.text)[1]);
    assert.equal(alive(pid), false);
  });

  test("a turn streams thought, plan and message chunks as text and completes with the message; nothing is left running", async () => {
    const r = await run(s.env, s.dir, ["--json", "--runner", "fake", "hello there"]);
    assert.equal(r.code, 0, r.err);
    const evs = events(r.out);
    const texts = evs.filter((e) => e.type === "text").map((e) => e.text);
    assert.deepEqual(texts.slice(0, 2), ["thinking: reading the prompt", "plan: [in_progress] answer"]);
    assert.equal(texts[2], "prompts=1 ");
    const done = evs.find((e) => e.type === "turn_completed");
    assert.match(done.result, /^prompts=1 session=sess-\d+-1 pid=\d+ cwd=\S+ perm=none task=hello there$/);
    const f = fields(done.result);
    assert.equal(f.cwd, s.dir);
    assert.equal(alive(f.pid), false, "the agent process outlived openagents run");
  });

  test("with nobody to ask, the permission request is denied: the agent's reject_once option", async () => {
    const r = await run(s.env, s.dir, ["--json", "--runner", "fake", "ask"]);
    assert.equal(r.code, 0, r.err);
    const evs = events(r.out);
    assert.equal(evs.find((e) => e.type === "turn_completed").result, "permission: selected no");
    const denied = evs.find((e) => e.type === "approval_denied");
    assert.match(denied.prompt, /Write notes\.txt \(edit\)\nappend one line to notes\.txt/);
  });

  test("fs/* and terminal/* requests, never advertised, get method-not-found", async () => {
    for (const word of ["fs", "terminal"]) {
      const r = await run(s.env, s.dir, ["--runner", "fake", word]);
      assert.equal(r.code, 0, r.err);
      assert.equal(r.out.trim().split("\n").at(-1), `${word}: error -32601`);
    }
  });

  const failures = [
    ["garbage", "runner_failed", /not an ACP message \(message \d+\): Parse error: the message is not JSON/],
    ["oversized", "frame_too_large", /longer than MAX_FRAME \(98304 bytes\)/],
    ["exit", "runner_failed", /exited during the turn \(exit status: 3\)/],
    ["chatty", "output_too_large", /more than MAX_OUTPUT \(1048576 bytes\)/],
    ["long", "output_too_large", /answer is longer than 98304 characters/],
    ["refuse", "runner_failed", /refused to go on \(stop reason `refusal`\)/],
    ["maxtokens", "runner_failed", /reached its token limit \(stop reason `max_tokens`\)/],
    ["error", "runner_failed", /answered session\/prompt with error -32603: /],
  ];
  for (const [word, code, message] of failures) {
    test(`a misbehaving agent (${word}) fails its turn with a typed error (${code})`, async () => {
      const r = await run(s.env, s.dir, ["--json", "--runner", "fake", word]);
      assert.equal(r.code, 1, r.err);
      const evs = events(r.out);
      const failed = evs.find((e) => e.type === "turn_failed");
      assert.equal(failed.error.code, code);
      assert.match(failed.error.message, message);
      if (code === "frame_too_large") assert.equal(failed.error.details.limit, MAX_FRAME);
      if (word === "chatty") {
        assert.equal(failed.error.details.limit, MAX_OUTPUT);
        const streamed = evs.filter((e) => e.type === "text").reduce((n, e) => n + e.text.length, 0);
        assert.ok(streamed <= MAX_OUTPUT, `streamed ${streamed} bytes of text`);
      }
    });
  }

  test("the Python SDK agent: one whole turn (thought, permission denied, answer)", async () => {
    const r = await run(s.env, s.dir, ["--json", "--runner", "py", "hi from node"]);
    assert.equal(r.code, 0, r.err);
    const evs = events(r.out);
    assert.equal(evs.filter((e) => e.type === "text")[0].text, "thinking: python agent thinking about hi from node");
    const result = evs.find((e) => e.type === "turn_completed").result;
    assert.match(result, /^python agent: prompts=1 permission=no pid=\d+$/);
    assert.equal(alive(Number(result.split("pid=")[1])), false);
  });
});

describe("openagents serve --http", () => {
  let s;
  let srv;
  const pids = new Set();
  before(async () => {
    s = setup({
      fake: fake({ max_processes: 8 }),
      capped: fake({ max_processes: 2 }),
      idle: fake({ idle_timeout_s: 1 }),
    });
    srv = await serve(s, ["fake", "capped", "idle"]);
  });
  after(async () => {
    if (srv.child.exitCode === null) srv.child.kill("SIGKILL");
    s.cleanup();
  });

  async function turn(runner, conversation, task) {
    const r = await srv.rpc("submit", { task, runner, conversation });
    if (r.result) {
      const f = fields(r.result.result);
      if (f.pid) pids.add(f.pid);
      return f;
    }
    return r.error;
  }

  test("two turns of one conversation reach the same agent session; another conversation gets another", async () => {
    const a1 = await turn("fake", "conv-a", "one");
    const a2 = await turn("fake", "conv-a", "two");
    const b1 = await turn("fake", "conv-b", "one");
    assert.equal(a1.prompts, 1);
    assert.equal(a2.prompts, 2);
    assert.equal(a2.session, a1.session);
    assert.equal(a2.pid, a1.pid);
    assert.equal(b1.prompts, 1);
    assert.notEqual(b1.session, a1.session);
    assert.notEqual(b1.pid, a1.pid);
    assert.ok(alive(a1.pid) && alive(b1.pid));
  });

  test("the live-process cap holds: the process idle the longest is closed first", async () => {
    const k1 = await turn("capped", "k1", "x");
    const k2 = await turn("capped", "k2", "x");
    assert.ok(alive(k1.pid) && alive(k2.pid));
    const k3 = await turn("capped", "k3", "x");
    await until(() => !alive(k1.pid), "the oldest idle process to be closed");
    assert.ok(alive(k2.pid) && alive(k3.pid));
    // k2 kept its session; k1 starts afresh (and closes k3, now the one idle the longest).
    assert.equal((await turn("capped", "k2", "x")).prompts, 2);
    const again = await turn("capped", "k1", "x");
    assert.equal(again.prompts, 1);
    assert.notEqual(again.pid, k1.pid);
    await until(() => !alive(k3.pid), "k3 to be closed for k1");
    assert.equal([k1.pid, k2.pid, k3.pid, again.pid].filter(alive).length, 2);
  });

  test("an idle session's process is gone after its idle timeout, and the next turn starts afresh", async () => {
    const first = await turn("idle", "sleepy", "x");
    assert.equal(first.prompts, 1);
    await until(() => !alive(first.pid), "the idle process to be closed", 15000);
    const next = await turn("idle", "sleepy", "x");
    assert.equal(next.prompts, 1);
    assert.notEqual(next.pid, first.pid);
  });

  test("an agent that exits mid-turn fails it with a typed error and is restarted for the next turn", async () => {
    const before = await turn("fake", "crashy", "x");
    const err = await turn("fake", "crashy", "exit");
    assert.equal(err.data.code, "runner_failed");
    assert.match(err.data.message, /exited during the turn/);
    assert.equal(alive(before.pid), false);
    const after = await turn("fake", "crashy", "x");
    assert.equal(after.prompts, 1);
    assert.notEqual(after.pid, before.pid);
  });

  test("an agent that died while idle is started afresh for the conversation's next turn", async () => {
    const first = await turn("fake", "fragile", "x");
    process.kill(first.pid, "SIGKILL");
    await until(() => !alive(first.pid), "the agent to die");
    const next = await turn("fake", "fragile", "x");
    assert.equal(next.prompts, 1, JSON.stringify(next));
    assert.notEqual(next.pid, first.pid);
  });

  async function interrupted(conversation, task) {
    const pending = srv.rpc("submit", { task, runner: "fake", conversation });
    await until(async () => (await srv.rpc("status")).result.active_turn?.conversation === conversation, "the turn to start");
    // The agent has the prompt once its first update is out; interrupting earlier is fine too.
    const r = await srv.rpc("interrupt", {});
    assert.equal(r.result.interrupted, true);
    return (await pending).error;
  }

  test("interrupt: an agent that honours session/cancel keeps its session; one that does not is killed", async () => {
    const first = await turn("fake", "stoppable", "x");
    const err = await interrupted("stoppable", "hang");
    assert.equal(err.data.code, "interrupted");
    const next = await turn("fake", "stoppable", "x");
    assert.equal(next.prompts, 3);
    assert.equal(next.pid, first.pid);
    const err2 = await interrupted("stoppable", "deaf");
    assert.equal(err2.data.code, "interrupted");
    assert.equal(alive(first.pid), false);
    assert.equal((await turn("fake", "stoppable", "x")).prompts, 1);
  });

  test("shutdown leaves no agent process running, nor anything an agent started", async () => {
    const spawner = await turn("fake", "spawner", "spawn");
    assert.ok(alive(spawner.child), "the agent's child should be running");
    pids.add(spawner.child);
    assert.ok(pids.size >= 6);
    assert.ok([...pids].some(alive), "some sessions should be live before shutdown");
    const r = await srv.rpc("shutdown", {});
    assert.equal(r.result.shutting_down, true);
    assert.equal(await srv.exited, 0);
    assert.deepEqual([...pids].filter(alive), []);
  });
});

describe("openagents serve --stdio", () => {
  test("two turns of one conversation share the agent's session; end of input ends the agent", async () => {
    const s = setup({ fake: fake() });
    try {
      const child = spawn(BIN, ["serve", "--stdio", "--runner", "fake"], { env: s.env, cwd: s.dir, stdio: ["pipe", "pipe", "pipe"] });
      const exited = new Promise((resolve) => child.on("exit", resolve));
      const answers = new Map();
      createInterface({ input: child.stdout }).on("line", (line) => {
        const msg = JSON.parse(line);
        if (msg.id !== undefined) answers.set(msg.id, msg);
      });
      const submit = async (id, task) => {
        child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method: "submit", params: { task, conversation: "stdio-1" } }) + "\n");
        await until(() => answers.has(id), `the answer to ${id}`, 20000);
        return fields(answers.get(id).result.result);
      };
      const one = await submit(1, "one");
      const two = await submit(2, "two");
      assert.equal(one.prompts, 1);
      assert.equal(two.prompts, 2);
      assert.equal(two.session, one.session);
      child.stdin.end();
      assert.equal(await exited, 0);
      assert.equal(alive(one.pid), false);
    } finally {
      s.cleanup();
    }
  });
});

/** A WebSocket frontend that answers approval requests with `decide(prompt)`. */
async function frontend(url, token, decide) {
  const ws = new WebSocket(new URL("frontend/v2", url).href.replace(/^http/, "ws"), ["openagents.v2"], { headers: { authorization: `Bearer ${token}` } });
  const prompts = [];
  const evs = [];
  const waiting = new Map();
  let id = 0;
  ws.on("message", (data) => {
    const msg = JSON.parse(String(data));
    if (msg.method === "frontend.v2.event") evs.push(msg.params.event);
    if (msg.method === "frontend.v2.approval") {
      prompts.push(msg.params.prompt);
      const approved = decide(msg.params.prompt);
      if (approved !== undefined) ws.send(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: { approved } }));
    } else if (msg.id !== undefined && waiting.has(msg.id)) {
      waiting.get(msg.id)(msg);
      waiting.delete(msg.id);
    }
  });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const call = (method, params) =>
    new Promise((resolve) => {
      const n = ++id;
      waiting.set(n, resolve);
      ws.send(JSON.stringify({ jsonrpc: "2.0", id: n, method, params }));
    });
  return { ws, prompts, evs, call };
}

describe("the WebSocket (/frontend/v2)", () => {
  let s;
  let srv;
  before(async () => {
    s = setup({ fake: fake(), py: python() });
    srv = await serve(s, ["fake", "py"]);
  });
  after(async () => {
    await srv.rpc("shutdown", {}).catch(() => undefined);
    await srv.exited;
    s.cleanup();
  });

  test("an approval answered yes selects the agent's allow_once option, one answered no its reject_once", async () => {
    let answer = true;
    const fe = await frontend(srv.url, s.token, () => answer);
    try {
      assert.ok((await fe.call("subscribe", {})).result);
      const yes = await fe.call("submit", { task: "ask", runner: "fake", conversation: "ws-1" });
      assert.equal(yes.result.result, "permission: selected once");
      // Streamed as it happened: the tool call, the approval asked and granted, the answer.
      await until(() => fe.evs.some((e) => e.type === "turn_completed"), "the turn's events");
      const kinds = fe.evs.map((e) => (e.type === "text" ? `text:${e.text}` : e.type));
      assert.deepEqual(kinds.slice(kinds.indexOf("turn_started")), [
        "turn_started",
        "text:tool: Write notes.txt [edit] (pending)",
        "approval_requested",
        "approval_resolved",
        "text:tool: Write notes.txt: completed",
        "text:permission: selected once",
        "turn_completed",
      ]);
      answer = false;
      const no = await fe.call("submit", { task: "ask", runner: "fake", conversation: "ws-1" });
      assert.equal(no.result.result, "permission: selected no");
      assert.equal(fields((await fe.call("submit", { task: "count", runner: "fake", conversation: "ws-1" })).result.result).perm, "selected:no");
      assert.equal(fe.prompts.length, 2);
      // Same conversation, same session: the counter is in the agent.
      assert.match(fe.prompts[0], /^The agent asks permission: Write notes\.txt \(edit\)/);
      const count = await fe.call("submit", { task: "count", runner: "fake", conversation: "ws-1" });
      assert.equal(fields(count.result.result).prompts, 4);
    } finally {
      fe.ws.close();
    }
  });

  test("a permission request pending when the turn is interrupted is answered `cancelled`; the session goes on", async () => {
    const fe = await frontend(srv.url, s.token, () => undefined);
    try {
      const pending = fe.call("submit", { task: "ask", runner: "fake", conversation: "ws-2" });
      await until(() => fe.prompts.length === 1, "the approval request");
      const stop = await fe.call("interrupt", {});
      assert.equal(stop.result.interrupted, true);
      assert.equal((await pending).error.data.code, "interrupted");
      const next = await fe.call("submit", { task: "count", runner: "fake", conversation: "ws-2" });
      assert.equal(fields(next.result.result).prompts, 2);
      assert.equal(fields(next.result.result).perm, "cancelled");
    } finally {
      fe.ws.close();
    }
  });

  test("the shipped Python client drives a multi-turn conversation over the WebSocket (approved) and HTTP (denied)", async () => {
    const r = await new Promise((resolve) => {
      const child = spawn(PYTHON, [join(ROOT, "tests/acp-agents/py_client_turns.py"), "fake"], {
        env: { ...s.env, OPENAGENTS_URL: srv.url, OPENAGENTS_TOKEN_FILE: join(s.dir, "token") },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdout.on("data", (d) => (out += d));
      child.stderr.on("data", (d) => (err += d));
      child.on("close", (code) => resolve({ code, out, err }));
    });
    assert.equal(r.code, 0, r.err);
    const results = r.out.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(results.map((x) => x.via), ["websocket", "websocket", "http", "http"]);
    assert.equal(results[0].result, "permission: selected once");
    assert.equal(fields(results[1].result).prompts, 2);
    assert.equal(fields(results[1].result).perm, "selected:once");
    assert.equal(results[2].result, "permission: selected no");
    assert.equal(fields(results[3].result).prompts, 4);
    assert.equal(fields(results[3].result).session, fields(results[1].result).session);
  });

  test("the shipped TypeScript client drives a multi-turn conversation over the WebSocket (approved) and HTTP (streamed)", async () => {
    const { connectWebSocket, OpenAgentsClient } = await import(pathToFileURL(join(ROOT, "clients/typescript/dist/node.js")).href);
    const ws = connectWebSocket({ url: srv.url, token: s.token, onApproval: () => true });
    try {
      const seen = [];
      const asked = await ws.runTurn({ task: "ask", runner: "fake", conversation: "ts-1" }, { onEvent: (ev) => seen.push(ev.event.type) });
      assert.equal(asked.result, "permission: selected once");
      assert.ok(seen.includes("approval_requested") && seen.includes("approval_resolved"), seen.join(" "));
      assert.equal(fields((await ws.runTurn({ task: "count", runner: "fake", conversation: "ts-1" })).result).prompts, 2);
    } finally {
      await ws.close();
    }
    const http = OpenAgentsClient.http({ url: srv.url, token: s.token });
    try {
      const texts = [];
      const r = await http.runTurn({ task: "count", runner: "fake", conversation: "ts-1" }, { onEvent: (ev) => ev.event.type === "text" && texts.push(ev.event.text) });
      assert.equal(fields(r.result).prompts, 3);
      assert.deepEqual(texts.slice(0, 3), ["thinking: reading the prompt", "plan: [in_progress] answer", "prompts=3 "]);
    } finally {
      await http.close();
    }
  });

  test("the Python SDK agent through the WebSocket, its permission approved", async () => {
    const fe = await frontend(srv.url, s.token, () => true);
    try {
      const r = await fe.call("submit", { task: "hello", runner: "py", conversation: "ws-py" });
      assert.match(r.result.result, /^python agent: prompts=1 permission=yes pid=\d+$/);
      const r2 = await fe.call("submit", { task: "again", runner: "py", conversation: "ws-py" });
      assert.match(r2.result.result, /^python agent: prompts=2 permission=yes/);
      assert.match(fe.prompts[0], /Run the Python tool \(execute\)/);
    } finally {
      fe.ws.close();
    }
  });
});
