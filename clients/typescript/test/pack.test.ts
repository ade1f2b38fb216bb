/**
 * The package as a user gets it: `npm pack`, installed from the tarball into an empty folder
 * (`--prefer-offline`: its one dependency, `ws`, is in the npm cache after `npm ci`, though its
 * registry metadata, which resolving a range needs, may not be on a new machine), imported there by
 * every entry point of its `exports` map, and type-checked as a consumer would.
 */

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";

import { PKG, ROOT, Setup, startHttp } from "./helpers.js";

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/** The first ```ts block of a README. */
function firstExample(readme: string): string {
  const m = /```ts\n([\s\S]*?)```/.exec(readme);
  assert.ok(m, "the README has a ```ts example");
  return m[1]!;
}

/** Runs `node FILE` in `cwd` with `env`, without blocking this process's event loop. */
function runNode(file: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    const child = spawn(process.execPath, [file], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    child.on("close", (code) => resolveRun({ code, stdout, stderr }));
  });
}

test("the packed package installs offline into an empty folder, imports and type-checks there, and its README example runs against serve --http", async () => {
  const dir = mkdtempSync(join(tmpdir(), "openagents-ts-pack-"));
  try {
    // dist/ is built already; --ignore-scripts skips the prepack rebuild.
    const pack = spawnSync(npm, ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], { cwd: PKG, encoding: "utf8" });
    assert.equal(pack.status, 0, pack.stderr);
    const [info] = JSON.parse(pack.stdout) as [{ filename: string; files: { path: string }[] }];
    const files = info.files.map((f) => f.path).sort();
    for (const f of ["package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/node.js", "dist/runner.js", "dist/generated/validators.js"]) {
      assert.ok(files.includes(f), `the tarball lacks ${f}`);
    }
    assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("node_modules/")), `the tarball holds sources or tests: ${files.join(", ")}`);

    const app = join(dir, "app");
    spawnSync("mkdir", [app]);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", private: true, type: "module" }));
    const install = spawnSync(npm, ["install", join(dir, info.filename), "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: app, encoding: "utf8" });
    assert.equal(install.status, 0, `npm install --prefer-offline: ${install.stdout}${install.stderr}`);
    const installed = JSON.parse(readFileSync(join(app, "node_modules/@openagents/client/package.json"), "utf8")) as { dependencies: Record<string, string> };
    assert.deepEqual(Object.keys(installed.dependencies), ["ws"], "no runtime dependency beyond ws");

    writeFileSync(
      join(app, "check.mjs"),
      `
import * as main from "@openagents/client";
import * as node from "@openagents/client/node";
import * as runner from "@openagents/client/runner";
const out = {
  client: typeof main.OpenAgentsClient.http,
  validates: main.isTurn({ schema: main.VERSION, assignment: "a", conversation: "c", agent: { runner: "r" }, task: "t", cwd: "/" }),
  busy: new main.BusyError({ code: "busy", message: "m", retryable: true }).rpcCode,
  stdio: typeof node.connectStdio,
  ws: typeof node.connectWebSocket,
  websocket: typeof main.OpenAgentsClient.websocket,
  strict: new main.SchemaMismatchError({ clientDigest: main.SCHEMA_DIGEST, runtimeDigest: "0", clientProtocolVersion: main.PROTOCOL_VERSION, runtimeProtocolVersion: undefined, where: "w", via: "v", message: "m" }) instanceof main.OpenAgentsError,
  serve: typeof runner.serveStreaming,
};
let deep = "importable";
try { await import("@openagents/client/dist/index.js"); } catch (e) { deep = e.code; }
out.deep = deep;
console.log(JSON.stringify(out));
`,
    );
    const run = spawnSync(process.execPath, ["check.mjs"], { cwd: app, encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), { client: "function", validates: true, busy: -32003, stdio: "function", ws: "function", websocket: "function", strict: true, serve: "function", deep: "ERR_PACKAGE_PATH_NOT_EXPORTED" });

    writeFileSync(
      join(app, "check.ts"),
      `
import { assertNever, isKnownRuntimeEvent, OpenAgentsClient, SchemaMismatchError } from "@openagents/client";
import type { ApprovalPrompt, RuntimeEvent, SchemaMismatch, SubmitResult } from "@openagents/client";
import { connectStdio, connectWebSocket } from "@openagents/client/node";
import { serveOnce } from "@openagents/client/runner";
export function kind(e: RuntimeEvent): string {
  if (!isKnownRuntimeEvent(e)) return "unknown";
  switch (e.type) {
    case "turn_started": case "text": case "turn_completed": case "turn_failed": case "approval_requested":
    case "approval_resolved": case "approval_denied": case "lagged": case "gap": case "shutting_down":
      return e.type;
    default:
      return assertNever(e);
  }
}
export async function use(c: OpenAgentsClient): Promise<SubmitResult> { return c.submit({ task: "x" }); }
export const s = typeof connectStdio;
export const w = connectWebSocket({
  url: "http://127.0.0.1:1/",
  token: "t",
  strictSchema: true,
  onSchemaMismatch: (m: SchemaMismatch) => console.warn(m.message),
  onApproval: async (p: ApprovalPrompt, { signal }) => !signal.aborted && p.prompt.length < 100,
});
export const b = (W: typeof WebSocket): OpenAgentsClient => OpenAgentsClient.websocket({ url: "https://example.test/", token: "t", WebSocket: W });
export const e = (x: unknown): string | undefined => (x instanceof SchemaMismatchError ? x.mismatch.runtimeDigest : undefined);
export const r = (): Promise<void> => serveOnce((t) => t.task);
`,
    );
    // The README example, as the installed package ships it: type-checked and run as written.
    const example = firstExample(readFileSync(join(app, "node_modules/@openagents/client/README.md"), "utf8"));
    writeFileSync(join(app, "readme.ts"), example);
    writeFileSync(join(app, "readme.mjs"), example);

    const tsc = join(PKG, "node_modules/typescript/bin/tsc");
    const types = dirname(join(PKG, "node_modules/@types/node/package.json"));
    const check = spawnSync(
      process.execPath,
      [tsc, "--strict", "--noEmit", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--lib", "es2022,dom", "--typeRoots", dirname(types), "--types", "node", "check.ts", "readme.ts"],
      { cwd: app, encoding: "utf8" },
    );
    assert.equal(check.status, 0, `a consumer's tsc --strict:\n${check.stdout}${check.stderr}`);

    const setup = new Setup("pack-readme");
    const server = await startHttp(setup, "echo");
    try {
      const run = await runNode("readme.mjs", app, { ...process.env, OPENAGENTS_URL: server.url, OPENAGENTS_TOKEN_FILE: server.tokenFile });
      assert.equal(run.code, 0, `the README example failed:\n${run.stdout}${run.stderr}\n${server.stderr()}`);
      const lines = run.stdout.trim().split("\n");
      assert.equal(lines.at(-1), "hello world", `the example prints the turn's result last: ${run.stdout}`);
      assert.ok(lines.some((l) => /^\d+ turn_started$/.test(l)), `the example prints streamed events: ${run.stdout}`);
      assert.ok(lines.some((l) => /^\d+ turn_completed$/.test(l)), `the example prints the terminal event: ${run.stdout}`);
    } finally {
      await server.stop();
      setup.cleanup();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("TypeScript generated for other schemas (ACP's, a service's with error codes) imports the installed package's runtime and runs with nothing copied beside it", () => {
  const dir = mkdtempSync(join(tmpdir(), "openagents-ts-foreign-"));
  try {
    const pack = spawnSync(npm, ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], { cwd: PKG, encoding: "utf8" });
    assert.equal(pack.status, 0, pack.stderr);
    const [info] = JSON.parse(pack.stdout) as [{ filename: string; files: { path: string }[] }];
    const app = join(dir, "app");
    spawnSync("mkdir", [app]);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", private: true, type: "module" }));
    const install = spawnSync(npm, ["install", join(dir, info.filename), "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: app, encoding: "utf8" });
    assert.equal(install.status, 0, `npm install --prefer-offline: ${install.stdout}${install.stderr}`);

    // The generator with its defaults, on ACP's published schema (vendored in the repository).
    const codegen = join(ROOT, "target/debug/openagents-codegen");
    const schema = join(ROOT, "tests/third-party-schemas/acp-v1.schema.json");
    const gen = spawnSync(codegen, ["typescript", "--schema", schema, "--out-dir", join(app, "acp")], { encoding: "utf8" });
    assert.equal(gen.status, 0, gen.stderr);
    const validators = readFileSync(join(app, "acp/validators.ts"), "utf8");
    assert.match(validators, /from "@openagents\/client\/rt"/, "the validators import the package's runtime");
    assert.doesNotMatch(validators, /\.\.\/rt\.js/, "and no file beside them");

    // A service schema with an error-code enum: its error classes need nothing of ours either.
    const notes = spawnSync(codegen, ["typescript", "--schema", join(ROOT, "codegen/tests/foreign/notes.schema.json"), "--out-dir", join(app, "notes")], { encoding: "utf8" });
    assert.equal(notes.status, 0, notes.stderr);

    writeFileSync(
      join(app, "use.ts"),
      `
import { errorClass, FullError, NotesException, UnknownNotesException } from "./notes/errors.js";
const full = new (errorClass("full"))({ code: "full", message: "no room" });
const later = new (errorClass("from_a_newer_server"))({ code: "full", message: "?" });
const errors = [full instanceof FullError, full instanceof NotesException, full.rpcCode, full.retryable, full.message, later instanceof UnknownNotesException, later.retryable];
import { validate } from "./acp/validators.js";
import type { SessionNotification } from "./acp/types.js";
const ok: SessionNotification = { sessionId: "s1", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "hi" } } };
const bad = { sessionId: 7, update: { sessionUpdate: "agent_message_chunk", content: { type: "text" } } };
const unknown = (() => { try { validate("NoSuchType", {}); return "accepted"; } catch (e) { return (e as Error).message.slice(0, 30); } })();
console.log(JSON.stringify({ ok: validate("SessionNotification", ok), bad: validate("SessionNotification", bad).map((v) => [v.pointer, v.keyword]).sort(), unknown, errors }));
`,
    );
    const tsc = join(PKG, "node_modules/typescript/bin/tsc");
    const types = dirname(join(PKG, "node_modules/@types/node/package.json"));
    const build = spawnSync(
      process.execPath,
      [tsc, "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--lib", "es2022,dom", "--typeRoots", dirname(types), "--types", "node", "--outDir", "out", "use.ts"],
      { cwd: app, encoding: "utf8" },
    );
    assert.equal(build.status, 0, `tsc --strict on the generated code:\n${build.stdout}${build.stderr}`);
    const run = spawnSync(process.execPath, ["out/use.js"], { cwd: app, encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    const out = JSON.parse(run.stdout) as { ok: unknown[]; bad: [string, string][]; unknown: string; errors: unknown[] };
    assert.deepEqual(out.errors, [true, true, -32051, true, "no room", true, false], "the notes schema's error classes, their codes and an unknown code");
    assert.deepEqual(out.ok, [], "a valid notification has no violations");
    assert.ok(out.bad.some(([p]) => p === "/sessionId"), `the number sessionId is named: ${JSON.stringify(out.bad)}`);
    assert.ok(out.bad.some(([p]) => p.startsWith("/update/content")), `the text block without text is named: ${JSON.stringify(out.bad)}`);
    assert.notEqual(out.unknown, "accepted", "an unknown type name is not valid");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the browser entry point imports nothing from Node.js", () => {
  // Follow relative imports from dist/index.js; none may be a Node.js built-in.
  const seen = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, "utf8");
    // Import and re-export statements start their line in tsc's output (doc comments do not).
    for (const m of text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["'];|^import\s*["']([^"']+)["'];/gm)) {
      const spec = (m[1] ?? m[2])!;
      assert.ok(spec.startsWith("."), `${file} imports ${spec}`);
      visit(join(dirname(file), spec));
    }
  };
  visit(join(PKG, "dist/index.js"));
  assert.ok(seen.size > 5);
});
