// Drives the real `target/debug/openagents acp` as an editor would, with the official ACP
// TypeScript SDK as the client, and validates every line the agent writes against the schema the
// SDK package ships (schema/v1/schema.json): the root message schema, then the `$defs` type of
// the method (requests and notifications by method, responses by the method of the request
// they answer).

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import Ajv2020 from "ajv/dist/2020.js";
import * as acp from "@agentclientprotocol/sdk";

const here = dirname(fileURLToPath(import.meta.url));
export const root = join(here, "..", "..");
export const bin = join(root, "target", "debug");
const require = createRequire(import.meta.url);
const schemaPath = join(here, "node_modules", "@agentclientprotocol", "sdk", "schema", "v1", "schema.json");
export const schema = JSON.parse(readFileSync(schemaPath, "utf8"));

const ajv = new Ajv2020({ strict: false, allErrors: true });
const ints = { int32: [-(2 ** 31), 2 ** 31 - 1], uint16: [0, 65535], uint32: [0, 2 ** 32 - 1], int64: [-(2 ** 63), 2 ** 63], uint64: [0, 2 ** 64] };
for (const [name, [lo, hi]] of Object.entries(ints)) {
  ajv.addFormat(name, { type: "number", validate: (x) => Number.isInteger(x) && x >= lo && x <= hi });
}
ajv.addFormat("uri", (s) => URL.canParse(s));
for (const name of ["double", "float", "uint", "int"]) ajv.addFormat(name, { type: "number", validate: () => true });
ajv.addSchema(schema, "acp");
const rootValidator = ajv.compile({ $ref: "acp#" });
const defs = new Map();
/** The validator of `$defs/<name>` in ACP's schema. */
export function def(name) {
  if (!schema.$defs[name]) throw new Error(`no $defs/${name} in ACP's schema`);
  if (!defs.has(name)) defs.set(name, ajv.compile({ $ref: `acp#/$defs/${name}` }));
  return defs.get(name);
}

/** The schema errors of `value` against `$defs/<name>` ([] when valid). */
export function check(name, value) {
  const v = def(name);
  return v(value) ? [] : v.errors.map((e) => `${name}${e.instancePath} ${e.message}`);
}

// What each method's result is, by the method of the client's request.
const RESULT_DEFS = {
  initialize: "InitializeResponse",
  "session/new": "NewSessionResponse",
  "session/load": "LoadSessionResponse",
  "session/resume": "ResumeSessionResponse",
  "session/list": "ListSessionsResponse",
  "session/prompt": "PromptResponse",
  "session/close": "CloseSessionResponse",
};
// What the agent may send, by method.
const AGENT_METHODS = { "session/update": "SessionNotification", "session/request_permission": "RequestPermissionRequest", "$/cancel_request": "CancelRequestNotification" };

/** A temporary operator setup: config (server enabled) and runner registry. */
export function operatorDir({ enabled = true, extraRunners = "" } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "openagents-acp-"));
  writeFileSync(join(dir, "config.toml"), enabled ? "[capabilities.server]\nenabled = true\n" : "");
  const runners =
    `[runners.echo]\ncommand = "${bin}/openagents-runner-echo"\n` +
    `[runners.ask]\ncommand = "${bin}/openagents-runner-ask"\n` +
    `[runners.hold]\ncommand = "${bin}/openagents-runner-hold"\n` +
    `[runners.fails]\ncommand = "/bin/sh"\nargs = ["-c", "echo 'the failing runner gives up' >&2; exit 3"]\n` +
    `[runners.inner]\ncommand = "${process.execPath}"\nargs = ["${join(here, "agents", "inner-agent.mjs")}"]\nprotocol = "acp"\n` +
    extraRunners;
  writeFileSync(join(dir, "runners.toml"), runners);
  return dir;
}

/**
 * Starts `openagents acp` with `args`. Returns the process plus a log of every line each side
 * wrote, the schema violations found in the agent's lines so far, and helpers to read them.
 */
export function startAgent(args = ["--runner", "echo"], { dir = operatorDir(), env = {} } = {}) {
  const child = spawn(join(bin, "openagents"), ["acp", ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, OPENAGENTS_CONFIG: join(dir, "config.toml"), OPENAGENTS_RUNNERS: join(dir, "runners.toml"), ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const agent = {
    child,
    dir,
    /** Every line the agent wrote on stdout, parsed (or `{unparsable: text}`). */
    lines: [],
    /** Methods of the client's requests by id. */
    clientRequests: new Map(),
    violations: [],
    stderr: "",
    waiters: [],
    exited: new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal }))),
  };
  child.stderr.on("data", (d) => {
    agent.stderr += d;
    if (process.env.ACP_TEST_VERBOSE) process.stderr.write(d);
  });
  let pending = "";
  const onAgentData = (chunk) => {
    pending += chunk.toString("utf8");
    let i;
    while ((i = pending.indexOf("\n")) >= 0) {
      const text = pending.slice(0, i);
      pending = pending.slice(i + 1);
      agentLine(agent, text);
    }
  };
  child.stdout.on("data", onAgentData);
  child.stdout.on("end", () => {
    if (pending.length) agent.violations.push(`the agent's last output has no newline: ${pending.slice(0, 200)}`);
  });
  return agent;
}

function agentLine(agent, text) {
  let msg;
  try {
    msg = JSON.parse(text);
  } catch {
    agent.violations.push(`not JSON on stdout: ${text.slice(0, 200)}`);
    agent.lines.push({ unparsable: text });
    return;
  }
  agent.lines.push(msg);
  validateAgentMessage(agent, msg);
  for (const w of [...agent.waiters]) {
    if (w.pred(msg)) {
      agent.waiters.splice(agent.waiters.indexOf(w), 1);
      w.resolve(msg);
    }
  }
}

/** Checks one message the agent wrote; violations are collected on `agent`. */
export function validateAgentMessage(agent, msg) {
  const bad = (why) => agent.violations.push(`${why}: ${JSON.stringify(msg).slice(0, 400)}`);
  if (!rootValidator(msg)) bad(`not an ACP message (${ajv.errorsText(rootValidator.errors)})`);
  if (msg.jsonrpc !== "2.0") bad("no jsonrpc 2.0");
  if (typeof msg.method === "string") {
    const defName = AGENT_METHODS[msg.method];
    if (!defName) return bad(`the agent sent a method it may not send (${msg.method})`);
    for (const e of check(defName, msg.params)) bad(e);
    if ("id" in msg !== (msg.method === "session/request_permission")) bad("request/notification mismatch");
    return;
  }
  if ("error" in msg) {
    for (const e of check("Error", msg.error)) bad(e);
    const d = msg.error.data;
    if (!d || typeof d.code !== "string" || typeof d.message !== "string" || typeof d.retryable !== "boolean") bad("error data is not a RuntimeSubmitError");
    return;
  }
  if ("result" in msg) {
    const method = agent.clientRequests.get(JSON.stringify(msg.id));
    if (method === undefined) return bad("a response to an id the client never used");
    const defName = RESULT_DEFS[method];
    if (defName) for (const e of check(defName, msg.result)) bad(e);
    else if (method.startsWith("_openagents/")) {
      if (typeof msg.result !== "object" || msg.result === null) bad("an extension result is not an object");
    } else bad(`a result for ${method}, which we do not offer`);
    return;
  }
  bad("neither request, notification nor response");
}

function clientLine(agent, text) {
  try {
    const m = JSON.parse(text);
    if (typeof m.method === "string" && "id" in m) agent.clientRequests.set(JSON.stringify(m.id), m.method);
  } catch {
    // Raw tests send bad lines on purpose.
  }
}

/** Writes raw text (a line each) to the agent's stdin, recording the client's requests. */
export function sendRaw(agent, ...lines) {
  for (const l of lines) {
    const text = typeof l === "string" ? l : JSON.stringify(l);
    clientLine(agent, text);
    agent.child.stdin.write(text + "\n");
  }
}

/** The next agent message matching `pred` (already written or yet to come), within `ms`. */
export function nextMessage(agent, pred, ms = 15000) {
  const seen = agent.lines.find((m) => pred(m) && !m.__taken);
  if (seen) {
    seen.__taken = true;
    return Promise.resolve(seen);
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no matching message within ${ms} ms; stderr:\n${agent.stderr}`)), ms);
    agent.waiters.push({
      pred,
      resolve: (m) => {
        clearTimeout(timer);
        Object.defineProperty(m, "__taken", { value: true, enumerable: false, writable: true });
        resolve(m);
      },
    });
  });
}

/** The SDK's stream over the agent's stdio, recording the client's lines. */
export function sdkStream(agent) {
  let closed = false;
  const input = new ReadableStream({
    start(controller) {
      agent.child.stdout.on("data", (chunk) => {
        // After the SDK closed the connection, the agent's last lines are only logged.
        if (!closed) controller.enqueue(new Uint8Array(chunk));
      });
      agent.child.stdout.on("end", () => {
        if (!closed) controller.close();
        closed = true;
      });
    },
    cancel() {
      closed = true;
    },
  });
  let buffered = "";
  const output = new WritableStream({
    write(chunk) {
      buffered += Buffer.from(chunk).toString("utf8");
      let i;
      while ((i = buffered.indexOf("\n")) >= 0) {
        clientLine(agent, buffered.slice(0, i));
        buffered = buffered.slice(i + 1);
      }
      return new Promise((resolve, reject) => agent.child.stdin.write(chunk, (e) => (e ? reject(e) : resolve())));
    },
    close() {
      agent.child.stdin.end();
    },
  });
  return acp.ndJsonStream(output, input);
}

/**
 * Runs `op(ctx, client)` with the SDK's client connected to a fresh agent. `handlers` may set
 * `requestPermission(params)` and `capabilities` (the client's). Returns what `op` returned,
 * the agent, and every `session/update` the client received, in order.
 */
export async function withClient(args, op, { handlers = {}, dir } = {}) {
  const agent = startAgent(args, dir ? { dir } : {});
  const updates = [];
  let app = acp.client({ name: "openagents-acp-editor-tests" }).onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
  });
  if (handlers.requestPermission) {
    app = app.onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => handlers.requestPermission(params, signal));
  }
  try {
    const result = await app.connectWith(sdkStream(agent), async (ctx) => op(ctx, agent, updates));
    return { result, agent, updates };
  } finally {
    agent.child.stdin.end();
    await Promise.race([agent.exited, new Promise((r) => setTimeout(r, 10000))]);
    if (agent.child.exitCode === null) agent.child.kill("SIGKILL");
    rmSync(agent.dir, { recursive: true, force: true });
  }
}

/** `initialize` as a v1 editor sends it. */
export function initialize(ctx, extra = {}) {
  return ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "openagents-acp-editor-tests", version: "1.0.0" },
    ...extra,
  });
}

/** A new session (optionally on another of the agent's runners). */
export function newSession(ctx, { runner, cwd = root, mcpServers = [] } = {}) {
  const params = { cwd, mcpServers };
  if (runner) params._meta = { "openagents/runner": runner };
  return ctx.request(acp.methods.agent.session.new, params);
}

/** Sends a text prompt; resolves with the response or the RequestError. */
export function prompt(ctx, sessionId, text) {
  return ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] }).then(
    (r) => ({ ok: r }),
    (e) => ({ err: e }),
  );
}

/** Whether process `pid` still exists (a zombie counts as gone). */
export function alive(pid) {
  const stat = `/proc/${pid}/stat`;
  if (!existsSync(stat)) return false;
  try {
    const state = readFileSync(stat, "utf8").replace(/^.*\) /s, "")[0];
    return state !== "Z";
  } catch {
    return false;
  }
}

/** The processes whose parent is `pid`, with their command lines. */
export function children(pid) {
  const out = [];
  for (const entry of require("node:fs").readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.replace(/^.*\) /s, "").split(" ")[1]);
      if (ppid === pid) out.push({ pid: Number(entry), cmd: readFileSync(`/proc/${entry}/cmdline`, "utf8").replace(/\0/g, " ") });
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

export { acp };
