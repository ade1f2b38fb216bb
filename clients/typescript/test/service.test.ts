/**
 * The package as the client of a service that is not ours: the TypeScript generated from
 * `examples/kv`'s schema with the generator's defaults (its runtime imported from this package),
 * a `GeneratedMethods` subclass whose `call` is `rpcCall` over the package's `HttpTransport`,
 * compiled with `tsc --strict` and run against the real `kv-server`.
 */

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";

import { PKG, ROOT } from "./helpers.js";

const CODEGEN = process.env.OPENAGENTS_CODEGEN_BIN ?? join(ROOT, "target/debug/openagents-codegen");
const KV_SERVER = join(ROOT, "target/debug/kv-server");

const CLIENT = `
import { GeneratedMethods, type CallOptions } from "./gen/methods.js";
import type * as T from "./gen/types.js";
import { validate } from "./gen/validators.js";
import { HttpTransport, RpcError, rpcCall } from "@openagents/client";

/** The kv service's typed client: the generated methods over JSON-RPC on HTTP. */
class KvClient extends GeneratedMethods {
  constructor(private readonly transport: HttpTransport) {
    super();
  }
  protected override async call<M extends T.MethodName>(method: M, params: T.MethodParams<M>, options?: CallOptions): Promise<T.MethodResult<M>> {
    return (await rpcCall(this.transport, method, params, options)) as T.MethodResult<M>;
  }
}

const kv = new KvClient(new HttpTransport({ url: process.env["KV_URL"]!, token: "unused" }));
const put = await kv.put({ key: "notes/a", value: { kind: "text", text: "hello" } });
const again = await kv.put({ key: "notes/a", value: { kind: "number", number: 2 }, if_version: put.version });
const got = await kv.get({ key: "notes/a" });
let missing: unknown = "answered";
try {
  await kv.get({ key: "notes/none" });
} catch (e) {
  missing = e instanceof RpcError ? { code: e.code, data: e.data } : String(e);
}
const deleted = await kv.delete({ key: "notes/a" });
const refused = validate("PutParams", { key: "Not A Key", value: { kind: "flag" } }).map((v) => v.pointer).sort();
console.log(JSON.stringify({ put, again, got, missing, deleted, refused }));
`;

test("methods generated from another service's schema drive that service through the package's HttpTransport", async () => {
  const dir = join(PKG, "build/kv-client");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const gen = spawnSync(CODEGEN, ["typescript", "--schema", join(ROOT, "examples/kv/schema"), "--out-dir", join(dir, "gen")], { encoding: "utf8" });
  assert.equal(gen.status, 0, gen.stderr);
  writeFileSync(join(dir, "client.ts"), CLIENT);
  // Inside the package folder, `@openagents/client` resolves to this package itself (its exports).
  const tsc = join(PKG, "node_modules/typescript/bin/tsc");
  const types = dirname(join(PKG, "node_modules/@types/node/package.json"));
  const build = spawnSync(
    process.execPath,
    [tsc, "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--lib", "es2022,dom", "--typeRoots", dirname(types), "--types", "node", "--outDir", join(dir, "out"), "--rootDir", dir, join(dir, "client.ts")],
    { cwd: PKG, encoding: "utf8" },
  );
  assert.equal(build.status, 0, `tsc --strict:\n${build.stdout}${build.stderr}`);

  const server = spawn(KV_SERVER, ["--http", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const url = await new Promise<string>((resolveUrl, reject) => {
      const lines = createInterface({ input: server.stdout! });
      lines.on("line", (l) => {
        const m = /^listening on (http:\/\/\S+)/.exec(l);
        if (m) resolveUrl(m[1]!);
      });
      server.on("exit", (code) => reject(new Error(`kv-server exited (${code}) before listening`)));
    });
    const run = spawnSync(process.execPath, [join(dir, "out/client.js")], { cwd: dir, encoding: "utf8", env: { ...process.env, KV_URL: url } });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
    const out = JSON.parse(run.stdout) as Record<string, unknown>;
    assert.deepEqual(out["put"], { key: "notes/a", value: { kind: "text", text: "hello" }, version: 1 });
    assert.deepEqual(out["again"], { key: "notes/a", value: { kind: "number", number: 2 }, version: 2 });
    assert.deepEqual(out["got"], out["again"]);
    assert.equal((out["missing"] as { code: number }).code, -32040, `not_found travels as its JSON-RPC code: ${JSON.stringify(out["missing"])}`);
    assert.deepEqual(out["deleted"], { deleted: true });
    assert.ok((out["refused"] as string[]).includes("/key"), `the generated validator names the bad key: ${JSON.stringify(out["refused"])}`);
  } finally {
    server.kill();
  }
});
