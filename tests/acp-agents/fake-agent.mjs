#!/usr/bin/env node
// A fake ACP agent on the official agent-side SDK (@agentclientprotocol/sdk, stable v1), for
// driving openagents' ACP runner host. The first word of the prompt says what to do:
//
//   (anything else)  one thought and a few message chunks; the answer reports the session, how
//                    many prompts it has seen, the process id and the prompt
//   ask              asks permission (allow_once / reject_once / allow_always / reject_always)
//                    and answers with the outcome it got
//   fs, terminal     calls fs/read_text_file or terminal/create and answers with the error code
//   hang             never answers until session/cancel, then answers `cancelled`
//   deaf             never answers, and ignores session/cancel
//   garbage          writes a line that is not JSON to stdout
//   oversized        writes one line of 200,000 bytes
//   exit             sends a chunk, then exits with status 3 mid-turn
//   spawn            starts a `sleep` in its process group and reports its pid (child=…)
//   chatty           streams message chunks until well past 1 MiB
//   long             an answer of 120,000 characters (within MAX_OUTPUT, past a result's limit)
//   refuse           answers with the stop reason `refusal`
//   maxtokens        answers with the stop reason `max_tokens`
//   error            fails the prompt (a JSON-RPC error)
//
// The answer to anything else also says how the session's last permission request ended.
//
// Logs go to stderr only.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const sessions = new Map(); // sessionId -> { prompts, cancel: null | () => void }
let nextSession = 1;

function update(ctx, sessionId, u) {
  return ctx.client.notify(acp.methods.client.session.update, { sessionId, update: u });
}
const text = (t) => ({ type: "text", text: t });

const app = acp
  .agent({ name: "fake-acp-agent" })
  .onRequest(acp.methods.agent.initialize, ({ params }) => {
    process.stderr.write(`fake-agent: initialize ${JSON.stringify(params)}\n`);
    if (params.clientCapabilities?.fs?.readTextFile || params.clientCapabilities?.fs?.writeTextFile || params.clientCapabilities?.terminal) {
      throw new Error("this fake agent expects a client without fs/terminal capabilities");
    }
    return { protocolVersion: acp.PROTOCOL_VERSION, agentCapabilities: { loadSession: false }, authMethods: [] };
  })
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    if (params.mcpServers.length !== 0) throw new Error("expected no MCP servers");
    const sessionId = `sess-${process.pid}-${nextSession++}`;
    sessions.set(sessionId, { prompts: 0, cwd: params.cwd, cancel: null, lastPermission: "none" });
    return { sessionId };
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    const s = sessions.get(params.sessionId);
    process.stderr.write(`fake-agent: cancel ${params.sessionId}\n`);
    if (!s) return;
    // Remembered too: the cancel may be handled before the prompt it cancels has started.
    s.cancelRequested = true;
    s.cancel?.();
  })
  .onRequest(acp.methods.agent.session.prompt, async (ctx) => {
    const { sessionId, prompt } = ctx.params;
    const s = sessions.get(sessionId);
    if (!s) throw acp.RequestError.sessionNotFound(sessionId);
    s.prompts += 1;
    const task = prompt.map((b) => (b.type === "text" ? b.text : "")).join("");
    const word = task.trim().split(/\s+/)[0];
    const cancelled = new Promise((resolve) => (s.cancel = resolve));
    try {
      return await handle(ctx, s, sessionId, task, word, cancelled);
    } finally {
      s.cancel = null;
      s.cancelRequested = false;
    }
  });

async function handle(ctx, s, sessionId, task, word, cancelled) {
  switch (word) {
    case "ask": {
      await update(ctx, sessionId, { sessionUpdate: "tool_call", toolCallId: "call-1", title: "Write notes.txt", kind: "edit", status: "pending" });
      const answer = await ctx.client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        toolCall: { toolCallId: "call-1", title: "Write notes.txt", kind: "edit", content: [{ type: "content", content: text("append one line to notes.txt") }] },
        options: [
          { optionId: "always", name: "Always allow", kind: "allow_always" },
          { optionId: "once", name: "Allow once", kind: "allow_once" },
          { optionId: "no", name: "Reject", kind: "reject_once" },
          { optionId: "never", name: "Always reject", kind: "reject_always" },
        ],
      });
      const outcome = answer.outcome.outcome === "selected" ? `selected ${answer.outcome.optionId}` : answer.outcome.outcome;
      s.lastPermission = outcome.replace(" ", ":");
      await update(ctx, sessionId, { sessionUpdate: "tool_call_update", toolCallId: "call-1", status: answer.outcome.optionId === "once" ? "completed" : "failed" });
      await update(ctx, sessionId, { sessionUpdate: "agent_message_chunk", content: text(`permission: ${outcome}`) });
      return { stopReason: "end_turn" };
    }
    case "fs":
    case "terminal": {
      let result;
      try {
        if (word === "fs") await ctx.client.request(acp.methods.client.fs.readTextFile, { sessionId, path: "/etc/hostname" });
        else await ctx.client.request(acp.methods.client.terminal.create, { sessionId, command: "/bin/true" });
        result = "succeeded";
      } catch (e) {
        result = `error ${e.code}`;
      }
      await update(ctx, sessionId, { sessionUpdate: "agent_message_chunk", content: text(`${word}: ${result}`) });
      return { stopReason: "end_turn" };
    }
    case "hang":
      await update(ctx, sessionId, { sessionUpdate: "agent_thought_chunk", content: text("waiting for a cancel") });
      if (!s.cancelRequested) await cancelled;
      return { stopReason: "cancelled" };
    case "deaf":
      await update(ctx, sessionId, { sessionUpdate: "agent_thought_chunk", content: text(`not listening (pid=${process.pid})`) });
      return new Promise(() => {});
    case "garbage":
      process.stdout.write("this is not json\n");
      return new Promise(() => {});
    case "oversized":
      process.stdout.write(JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: { sessionId, update: { sessionUpdate: "agent_message_chunk", content: text("x".repeat(200000)) } } }) + "\n");
      return new Promise(() => {});
    case "exit":
      await update(ctx, sessionId, { sessionUpdate: "agent_message_chunk", content: text("about to crash") });
      setTimeout(() => process.exit(3), 50);
      return new Promise(() => {});
    case "chatty": {
      const chunk = "y".repeat(60000);
      for (let i = 0; i < 30; i++) await update(ctx, sessionId, { sessionUpdate: "agent_message_chunk", content: text(chunk) });
      return { stopReason: "end_turn" };
    }
    case "spawn": {
      const child = spawn("sleep", ["300"], { stdio: "ignore" });
      await update(ctx, sessionId, { sessionUpdate: "agent_message_chunk", content: text(`prompts=${s.prompts} pid=${process.pid} child=${child.pid}`) });
      return { stopReason: "end_turn" };
    }
    case "long":
      for (let i = 0; i < 2; i++) await update(ctx, sessionId, { sessionUpdate: "agent_message_chunk", content: text("z".repeat(60000)) });
      return { stopReason: "end_turn" };
    case "refuse":
      return { stopReason: "refusal" };
    case "maxtokens":
      return { stopReason: "max_tokens" };
    case "error":
      throw new Error("the model is unavailable");
    default: {
      await update(ctx, sessionId, { sessionUpdate: "agent_thought_chunk", content: text("reading ") });
      await update(ctx, sessionId, { sessionUpdate: "agent_thought_chunk", content: text("the prompt") });
      await update(ctx, sessionId, { sessionUpdate: "plan", entries: [{ content: "answer", priority: "high", status: "in_progress" }] });
      await update(ctx, sessionId, { sessionUpdate: "agent_message_chunk", content: text(`prompts=${s.prompts} `) });
      await update(ctx, sessionId, { sessionUpdate: "agent_message_chunk", content: text(`session=${sessionId} pid=${process.pid} cwd=${s.cwd} perm=${s.lastPermission} task=${task}`) });
      return { stopReason: "end_turn" };
    }
  }
}

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const connection = app.connect(stream);
// ACP has no shutdown method: the client closes stdin.
connection.closed.then(() => process.exit(0));
