#!/usr/bin/env node
// A small ACP agent on the official agent-side SDK, installed as a `protocol = "acp"` runner,
// so an editor's turn goes editor → `openagents acp` → runtime → this agent. It streams two
// message chunks; a prompt starting with "ask" first asks permission (allow_once /
// reject_once) and says what it got. Logs go to stderr only.
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const text = (t) => ({ type: "text", text: t });
let sessions = 0;

const app = acp
  .agent({ name: "openagents-editor-test-inner-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({ protocolVersion: acp.PROTOCOL_VERSION, agentCapabilities: {} }))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: `inner-${++sessions}` }))
  .onNotification(acp.methods.agent.session.cancel, () => {})
  .onRequest(acp.methods.agent.session.prompt, async (ctx) => {
    const { sessionId, prompt } = ctx.params;
    const task = prompt.map((b) => (b.type === "text" ? b.text : "")).join("");
    const say = (t) => ctx.client.notify(acp.methods.client.session.update, { sessionId, update: { sessionUpdate: "agent_message_chunk", content: text(t) } });
    let verdict = "";
    if (task.startsWith("ask")) {
      const answer = await ctx.client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        toolCall: { toolCallId: "inner-call", title: "Edit notes.txt", kind: "edit" },
        options: [
          { optionId: "yes", name: "Allow once", kind: "allow_once" },
          { optionId: "no", name: "Reject", kind: "reject_once" },
        ],
      });
      verdict = answer.outcome.outcome === "selected" ? ` (${answer.outcome.optionId})` : " (cancelled)";
    }
    await say("inner agent: ");
    await say(`${task}${verdict}`);
    return { stopReason: "end_turn" };
  });

app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
