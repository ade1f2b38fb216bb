/**
 * The schema check against the real `openagents serve --http` (and `--stdio`): a client of the
 * runtime's own schema reports nothing; a client generated from an older bundle (one description
 * changed, so another digest) warns once per client, naming both digests, both protocol versions,
 * where it connected and what to do, and in strict mode fails with `SchemaMismatchError` — over
 * HTTP (response headers), the WebSocket (the handshake in Node.js; `status` browser-style) and
 * stdio (`status`).
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { OpenAgentsClient, PROTOCOL_VERSION, SCHEMA_DIGEST } from "@openagents/client";
import type { SchemaMismatch, WebSocketConstructor } from "@openagents/client";
import { connectStdio, connectWebSocket } from "@openagents/client/node";

import { BIN, PKG, ROOT, Setup, startHttp } from "./helpers.js";
import type { HttpServer } from "./helpers.js";

const CODEGEN = join(ROOT, "target/debug/openagents-codegen");
const setup = new Setup("schema");
let server: HttpServer;

before(async () => {
  server = await startHttp(setup, "echo-ts");
});

after(async () => {
  await server?.stop();
  setup.cleanup();
});

test("a client of the runtime's own schema reports no mismatch, on any transport, strict or not", async () => {
  const WS = ((await import("ws" as string)) as { default: WebSocketConstructor }).default;
  const found: SchemaMismatch[] = [];
  const onSchemaMismatch = (m: SchemaMismatch): void => void found.push(m);
  const makers: [string, (strictSchema: boolean) => OpenAgentsClient][] = [
    ["http", (strictSchema) => OpenAgentsClient.http({ url: server.url, token: server.token, strictSchema, onSchemaMismatch })],
    ["ws", (strictSchema) => connectWebSocket({ url: server.url, token: server.token, strictSchema, onSchemaMismatch })],
    ["ws (browser-style)", (strictSchema) => OpenAgentsClient.websocket({ url: server.url, token: server.token, WebSocket: WS, strictSchema, onSchemaMismatch })],
    ["stdio", (strictSchema) => connectStdio({ runner: "echo-ts", bin: BIN, env: setup.env, cwd: setup.dir, strictSchema, onSchemaMismatch })],
  ];
  for (const [name, make] of makers) {
    for (const strict of [false, true]) {
      const client = make(strict);
      try {
        const status = await client.status();
        assert.equal(status.schema_digest, SCHEMA_DIGEST, `${name}: the runtime runs this client's schema`);
        assert.equal(status.protocol_version, PROTOCOL_VERSION);
        assert.equal((await client.submit({ task: "same schema" })).result, "same schema", name);
        assert.equal(client.schemaMismatchFound, undefined, name);
      } finally {
        await client.close();
      }
    }
  }
  assert.deepEqual(found, [], "onSchemaMismatch was never called");
});

/** What the driver below prints, per transport. */
interface DriverReport {
  digest: string;
  protocolVersion: string;
  results: {
    [transport: string]: {
      warned: string[];
      strict: { name: string; isClass: boolean; isBase: boolean; message: string; runtimeDigest: string } | null;
      again: string | null;
    };
  };
}

/** Runs in the temporary copy of the package: each transport's warning (once per client) and strict error. */
const DRIVER = `
import WS from "ws";
import { OpenAgentsClient, OpenAgentsError, PROTOCOL_VERSION, SCHEMA_DIGEST, SchemaMismatchError } from "./dist/index.js";
import { connectStdio, connectWebSocket } from "./dist/node.js";

const [url, token, bin] = process.argv.slice(2);
const warnings = [];
process.on("warning", (w) => { if (w.name === "SchemaMismatchWarning") warnings.push(w.message); });
const makers = {
  http: (o) => OpenAgentsClient.http({ url, token, ...o }),
  ws: (o) => connectWebSocket({ url, token, ...o }),
  "ws-browser": (o) => OpenAgentsClient.websocket({ url, token, WebSocket: WS, ...o }),
  stdio: (o) => connectStdio({ runner: "echo-ts", bin, ...o }),
};
const out = { digest: SCHEMA_DIGEST, protocolVersion: PROTOCOL_VERSION, results: {} };
for (const [name, make] of Object.entries(makers)) {
  const before = warnings.length;
  const client = make({});
  await client.status();
  await client.status();
  await client.submit({ task: "still works" });
  await new Promise((r) => setTimeout(r, 10)); // warnings are emitted on the next tick
  await client.close();
  const strict = make({ strictSchema: true });
  let err = null;
  try {
    await strict.status();
  } catch (e) {
    err = { name: e.name, isClass: e instanceof SchemaMismatchError, isBase: e instanceof OpenAgentsError, message: e.message, runtimeDigest: e.mismatch?.runtimeDigest };
  }
  let again = null;
  try {
    await strict.submit({ task: "refused" });
  } catch (e) {
    again = e.name;
  }
  await strict.close();
  out.results[name] = { warned: warnings.slice(before), strict: err, again };
}
console.log(JSON.stringify(out));
`;

test("a client generated from an older bundle reports the mismatch: a warning once per client, an error in strict mode", () => {
  const dir = mkdtempSync(join(tmpdir(), "openagents-ts-older-"));
  try {
    // The older bundle: today's, with one description worded differently.
    const bundle = join(dir, "bundle.json");
    const made = spawnSync(CODEGEN, ["bundle", "--schema", join(ROOT, "schema"), "--out", bundle], { encoding: "utf8" });
    assert.equal(made.status, 0, made.stderr);
    const doc = JSON.parse(readFileSync(bundle, "utf8")) as { $defs: { RuntimeStatus: { description: string } } };
    doc.$defs.RuntimeStatus.description += " (an older wording)";
    writeFileSync(bundle, JSON.stringify(doc, null, 2));

    // The package's sources, with generated modules from that bundle, compiled with its tsc.
    cpSync(join(PKG, "src"), join(dir, "src"), { recursive: true });
    rmSync(join(dir, "src/generated"), { recursive: true });
    const gen = spawnSync(CODEGEN, ["typescript", "--schema", bundle, "--out-dir", join(dir, "src/generated"), "--runtime", "../rt.js", "--error-base", "../error.js"], { encoding: "utf8" });
    assert.equal(gen.status, 0, gen.stderr);
    copyFileSync(join(PKG, "tsconfig.json"), join(dir, "tsconfig.json"));
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "older-client", private: true, type: "module" }));
    symlinkSync(join(PKG, "node_modules"), join(dir, "node_modules"), "dir");
    const tsc = spawnSync(process.execPath, [join(PKG, "node_modules/typescript/bin/tsc"), "-p", join(dir, "tsconfig.json")], { cwd: dir, encoding: "utf8" });
    assert.equal(tsc.status, 0, `tsc: ${tsc.stdout}${tsc.stderr}`);
    writeFileSync(join(dir, "driver.mjs"), DRIVER);

    const run = spawnSync(process.execPath, ["driver.mjs", server.url, server.token, BIN], { cwd: dir, env: setup.env, encoding: "utf8", timeout: 120_000 });
    assert.equal(run.status, 0, `the driver failed: ${run.stdout}${run.stderr}`);
    const report = JSON.parse(run.stdout) as DriverReport;
    const old = report.digest;
    assert.match(old, /^[0-9a-f]{64}$/);
    assert.notEqual(old, SCHEMA_DIGEST, "the older bundle has another digest");

    const ws = new URL("frontend/v2", server.url.replace(/^http/, "ws")).href;
    const where: { [transport: string]: string } = { http: server.url, ws, "ws-browser": ws, stdio: "serve --stdio --runner echo-ts" };
    const via: { [transport: string]: string } = { http: "HTTP response headers", ws: "the WebSocket handshake", "ws-browser": "the `status` result", stdio: "the `status` result" };
    assert.deepEqual(Object.keys(report.results), Object.keys(where));
    for (const [transport, r] of Object.entries(report.results)) {
      assert.equal(r.warned.length, 1, `${transport}: one SchemaMismatchWarning per client: ${JSON.stringify(r.warned)}`);
      const message = r.warned[0]!;
      for (const needle of [
        `generated from schema ${old} (protocol ${report.protocolVersion})`,
        `runs schema ${SCHEMA_DIGEST} (protocol ${PROTOCOL_VERSION}; reported in ${via[transport]!})`,
        where[transport]!,
        "make codegen",
        "openagents-codegen compat",
      ]) {
        assert.ok(message.includes(needle), `${transport}: the warning says ${JSON.stringify(needle)}:\n${message}`);
      }
      assert.ok(!message.includes(server.token), "never the token");
      assert.ok(r.strict, `${transport}: strict mode fails the call`);
      assert.equal(r.strict.name, "SchemaMismatchError");
      assert.ok(r.strict.isClass && r.strict.isBase, `${transport}: a SchemaMismatchError, an OpenAgentsError`);
      assert.equal(r.strict.runtimeDigest, SCHEMA_DIGEST);
      assert.equal(r.strict.message, message, `${transport}: the error tells the same story`);
      assert.equal(r.again, "SchemaMismatchError", `${transport}: every later call fails too`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
