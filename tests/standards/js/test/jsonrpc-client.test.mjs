// A third-party strict JSON-RPC 2.0 client, the npm package json-rpc-2.0 (pinned in
// package.json and package-lock.json), against the real `openagents serve --http`: a call, an
// error, a notification (204), a batch, and a 401 and 415 that the client settles with the
// server's JSON-RPC error (code, message and data) instead of waiting forever. Its transport is
// the package README's fetch transport, except that every body must pass the package's own
// `isJSONRPCResponse` guard, and a refusal's body (id null) is handed to the call it answers;
// `client.timeout` bounds every call, so a reply the client cannot match fails the test rather
// than hanging it.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  JSONRPCClient,
  JSONRPCErrorException,
  createJSONRPCNotification,
  createJSONRPCRequest,
  isJSONRPCResponse,
  isJSONRPCResponses,
} from "json-rpc-2.0";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
const bin = join(root, "target", "debug");
const BOUND_MS = 30_000;

let server;
let folder;

before(async () => {
  folder = mkdtempSync(join(tmpdir(), "openagents-json-rpc-2.0-"));
  writeFileSync(join(folder, "config.toml"), "[capabilities.server]\nenabled = true\n");
  writeFileSync(join(folder, "runners.toml"), `[runners.echo]\ncommand = "${join(bin, "openagents-runner-echo")}"\n`);
  const child = spawn(join(bin, "openagents"), ["serve", "--http", "--runner", "echo"], {
    cwd: folder,
    env: { ...process.env, OPENAGENTS_CONFIG: join(folder, "config.toml"), OPENAGENTS_RUNNERS: join(folder, "runners.toml"), XDG_RUNTIME_DIR: folder },
    stdio: ["ignore", "pipe", "ignore"],
  });
  const line = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`no readiness line within ${BOUND_MS} ms`)), BOUND_MS);
    createInterface({ input: child.stdout }).once("line", (l) => {
      clearTimeout(timer);
      ok(l);
    });
    child.once("exit", (code) => fail(new Error(`openagents serve exited (${code}) before its readiness line`)));
  });
  const ready = JSON.parse(line);
  server = { child, url: ready.url.replace(/\/$/, ""), token: readFileSync(ready.token_file, "utf8").trim() };
});

after(() => {
  server?.child.kill("SIGKILL");
  if (folder) rmSync(folder, { recursive: true, force: true });
});

/** A json-rpc-2.0 client over `POST /rpc` with `headers`; every call bounded by BOUND_MS. */
function clientWith(headers) {
  const client = new JSONRPCClient(async (payload) => {
    const response = await fetch(`${server.url}/rpc`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(payload) });
    if (response.status === 204) {
      assert.equal(await response.text(), "", "a 204 has no body");
      return;
    }
    const body = await response.json();
    assert.ok(isJSONRPCResponse(body) || isJSONRPCResponses(body), `not a JSON-RPC 2.0 response (HTTP ${response.status}): ${JSON.stringify(body)}`);
    if (response.status === 200) {
      client.receive(body);
      return;
    }
    // A transport refusal: the body is the JSON-RPC error, its id null (the request was not
    // read); HTTP pairs it with the request it answers, so this transport hands it to each
    // waiting call of the payload.
    assert.equal(body.id, null);
    assert.ok(body.error, "a refusal is an error response");
    for (const request of Array.isArray(payload) ? payload : [payload]) {
      if (request.id !== undefined) client.receive({ ...body, id: request.id });
    }
  });
  return { client, bounded: client.timeout(BOUND_MS) };
}

const authorized = () => clientWith({ authorization: `Bearer ${server.token}` });

test("a call and its result", async () => {
  const { bounded } = authorized();
  const status = await bounded.request("status");
  assert.equal(status.state, "idle");
  const submitted = await bounded.request("submit", { task: "hello from json-rpc-2.0" });
  assert.equal(submitted.result, "hello from json-rpc-2.0");
});

test("errors are JSON-RPC errors with the specification's code and title", async () => {
  const { bounded } = authorized();
  await assert.rejects(bounded.request("no.such.method"), (e) => e instanceof JSONRPCErrorException && e.code === -32601 && e.message === "Method not found" && e.data.code === "unknown_method");
  await assert.rejects(bounded.request("status", { x: 1 }), (e) => e.code === -32602 && e.message === "Invalid params");
  await assert.rejects(bounded.request("release", [1, 2]), (e) => e.code === -32602);
});

test("a notification is sent and gets nothing (204)", async () => {
  const { client } = authorized();
  const answered = await fetch(`${server.url}/rpc`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${server.token}` }, body: JSON.stringify(createJSONRPCNotification("interrupt")) });
  assert.equal(answered.status, 204);
  client.notify("interrupt");
});

test("a batch: one reply per request, notifications left out", async () => {
  const { bounded } = authorized();
  const replies = await bounded.requestAdvanced([createJSONRPCRequest(1, "status"), createJSONRPCNotification("interrupt"), createJSONRPCRequest("two", "no.such.method"), createJSONRPCRequest(3, "rpc.discover")]);
  assert.equal(replies.length, 3);
  const [status, unknown, discover] = replies;
  assert.equal(status.id, 1);
  assert.equal(status.result.state, "idle");
  assert.equal(unknown.id, "two");
  assert.equal(unknown.error.code, -32601);
  assert.equal(discover.id, 3);
  assert.equal(discover.result.openrpc.split(".")[0], "1");
});

test("a 401 settles the call with the server's JSON-RPC error, never a hang", async () => {
  for (const headers of [{}, { authorization: `Bearer ${"0".repeat(64)}` }]) {
    const { bounded } = clientWith(headers);
    await assert.rejects(bounded.request("status"), (e) => e instanceof JSONRPCErrorException && e.code === -32001 && e.message === "Unauthorized" && e.data.code === "unauthorized");
  }
});

test("a 415 settles the call with the server's JSON-RPC error", async () => {
  const { bounded } = clientWith({ authorization: `Bearer ${server.token}`, "content-type": "text/plain" });
  await assert.rejects(bounded.request("status"), (e) => e instanceof JSONRPCErrorException && e.code === -32600 && e.message === "Invalid Request");
});
