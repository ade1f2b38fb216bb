/**
 * What the client does differently in a browser, against the real `openagents serve --http`:
 * events come over the WebSocket `subscribe` (a browser's `EventSource` cannot send the
 * `Authorization` header, and the token never goes in a URL), and `runTurn` works where
 * `crypto.randomUUID` does not exist (a page served over plain HTTP from a non-loopback host).
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { HttpTransport, OpenAgentsClient } from "@openagents/client";
import type { ServerEvent, WebSocketConstructor } from "@openagents/client";

import { Setup, startHttp } from "./helpers.js";
import type { HttpServer } from "./helpers.js";

const setup = new Setup("browser-events");
let server: HttpServer;

/** `ws` as a WHATWG `WebSocket` constructor: what a browser's global would be. */
async function whatwgWebSocket(): Promise<WebSocketConstructor> {
  const name: string = "ws";
  return ((await import(name)) as { default: WebSocketConstructor }).default;
}

before(async () => {
  server = await startHttp(setup, "echo-ts");
});

after(async () => {
  await server?.stop();
  setup.cleanup();
});

test("HTTP events come over the WebSocket by default in a browser, over SSE elsewhere", async () => {
  assert.equal(new HttpTransport({ url: server.url, token: server.token }).eventsVia, "sse");
  const g = globalThis as { document?: unknown; WebSocket?: unknown };
  const had = { document: g.document, WebSocket: g.WebSocket };
  g.document = {};
  g.WebSocket = await whatwgWebSocket();
  try {
    assert.equal(new HttpTransport({ url: server.url, token: server.token }).eventsVia, "websocket");
    assert.equal(new HttpTransport({ url: server.url, token: server.token, events: "sse" }).eventsVia, "sse", "the option wins");
  } finally {
    g.document = had.document;
    g.WebSocket = had.WebSocket;
  }
});

test("events: \"websocket\" subscribes on /frontend/v2 (no GET /events) and the turn's events arrive", async () => {
  const requested: string[] = [];
  const fetchSpy: typeof fetch = (input, init) => {
    requested.push(String(input instanceof Request ? input.url : input));
    return fetch(input, init);
  };
  const client = OpenAgentsClient.http({ url: server.url, token: server.token, events: "websocket", WebSocket: await whatwgWebSocket(), fetch: fetchSpy });
  try {
    const seen: ServerEvent[] = [];
    const r = await client.runTurn({ task: "over the socket" }, { onEvent: (ev) => seen.push(ev) });
    assert.equal(r.result, "over the socket");
    assert.deepEqual(
      seen.map((e) => e.event.type),
      ["turn_started", "text", "text", "text", "turn_completed"],
    );
    assert.ok(requested.length > 0, "calls go over fetch");
    assert.ok(requested.every((u) => new URL(u).pathname === "/rpc"), `only POST /rpc over fetch: ${requested.join(", ")}`);
    assert.ok(requested.every((u) => !u.includes(server.token)), "no token in a URL");
  } finally {
    await client.close();
  }
});

test("runTurn works without crypto.randomUUID (a non-secure page has none)", async () => {
  const c = globalThis.crypto as { randomUUID?: unknown };
  Object.defineProperty(c, "randomUUID", { value: undefined, configurable: true, writable: true });
  const client = OpenAgentsClient.http({ url: server.url, token: server.token });
  try {
    assert.equal(typeof c.randomUUID, "undefined");
    const r = await client.runTurn({ task: "no uuid here" });
    assert.equal(r.result, "no uuid here");
    assert.match(r.assignment, /^asg-[0-9a-f]{32}$/);
  } finally {
    delete (c as { randomUUID?: unknown }).randomUUID;
    await client.close();
  }
  assert.equal(typeof c.randomUUID, "function", "restored");
});
