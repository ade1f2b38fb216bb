/**
 * The history methods against the real `openagents serve --http`: `conversations` pages newest
 * first with a cursor, `conversation` gives a conversation's turns in order with their outcomes,
 * and an id the runtime does not hold is a `ConversationNotFoundError`.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { ConversationNotFoundError, InvalidParamsError, OpenAgentsClient } from "@openagents/client";

import { Setup, startHttp } from "./helpers.js";
import type { HttpServer } from "./helpers.js";

const setup = new Setup("history");
// Ids of this run: the runtime may be on a store that earlier runs wrote to.
const run = Date.now().toString(36);
const A = `ts-a-${run}`;
const B = `ts-b-${run}`;
let server: HttpServer;
let client: OpenAgentsClient;

before(async () => {
  server = await startHttp(setup, "echo-ts");
  client = OpenAgentsClient.http({ url: server.url, token: server.token });
  await client.submit({ task: "first question", conversation: A });
  await client.submit({ task: "second one", conversation: B });
  await client.submit({ task: "a follow-up", conversation: A });
});

after(async () => {
  await client?.close();
  await server?.stop();
  setup.cleanup();
});

test("conversations: newest first, one page at a time", async () => {
  const page = await client.conversations({ limit: 1 });
  assert.deepEqual(page.conversations.map((c) => c.id), [A]);
  assert.ok(page.next !== undefined);
  const first = page.conversations[0]!;
  assert.deepEqual([first.runner, first.title, first.turns], ["echo-ts", "first question", 2]);
  assert.ok(first.updated_at_ms >= first.created_at_ms);
  const rest = await client.conversations({ limit: 1, cursor: page.next });
  assert.deepEqual(rest.conversations.map((c) => c.id), [B]);
  const all = await client.conversations();
  assert.deepEqual(all.conversations.slice(0, 2).map((c) => c.id), [A, B]);
});

test("conversation: its turns in order, paged, with outcomes and event ranges", async () => {
  const conv = await client.conversation({ id: A });
  assert.equal(conv.conversation.id, A);
  assert.deepEqual(conv.turns.map((t) => [t.task, t.outcome, t.result]), [
    ["first question", "completed", "first question"],
    ["a follow-up", "completed", "a follow-up"],
  ]);
  for (const t of conv.turns) {
    assert.ok(t.last_seq !== undefined && t.last_seq > t.first_seq);
    assert.ok(t.finished_at_ms !== undefined && t.finished_at_ms >= t.started_at_ms);
  }
  const one = await client.conversation({ id: A, limit: 1 });
  assert.deepEqual(one.turns.map((t) => t.task), ["first question"]);
  assert.ok(one.next !== undefined);
  const two = await client.conversation({ id: A, limit: 1, cursor: one.next });
  assert.deepEqual(two.turns.map((t) => t.task), ["a follow-up"]);
  assert.equal(two.next, undefined);
});

test("an unknown id and a limit past HISTORY_MAX_PAGE are typed errors", async () => {
  await assert.rejects(client.conversation({ id: "ts-missing" }), (e: unknown) => {
    assert.ok(e instanceof ConversationNotFoundError);
    assert.equal(e.retryable, false);
    return true;
  });
  await assert.rejects(client.conversations({ limit: 101 }), (e: unknown) => e instanceof InvalidParamsError);
});
