// Shared helpers: a throwaway operator setup (registry, configuration, token) under a temporary
// folder, the real `openagents` binary, and process checks.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(here, "../..");
export const BIN = process.env.OPENAGENTS_BIN ?? join(ROOT, "target/debug/openagents");
export const FAKE_AGENT = join(ROOT, "tests/acp-agents/fake-agent.mjs");
export const PY_AGENT = join(ROOT, "tests/acp-agents/py_agent.py");
export const PYTHON = process.env.OPENAGENTS_VENV ? join(process.env.OPENAGENTS_VENV, "bin/python") : join(ROOT, ".venv/bin/python");

/** A folder with `runners.toml` (the given entries), `config.toml` (server on) and a token. */
export function setup(runners) {
  const dir = mkdtempSync(join(tmpdir(), "oa-acp-"));
  let toml = "";
  for (const [id, r] of Object.entries(runners)) {
    toml += `[runners.${id}]\ncommand = ${JSON.stringify(r.command)}\nargs = ${JSON.stringify(r.args ?? [])}\nprotocol = "acp"\n`;
    for (const k of ["timeout_s", "idle_timeout_s", "max_processes"]) if (r[k] !== undefined) toml += `${k} = ${r[k]}\n`;
  }
  writeFileSync(join(dir, "runners.toml"), toml);
  writeFileSync(join(dir, "config.toml"), "[capabilities.server]\nenabled = true\n");
  const token = randomBytes(32).toString("hex");
  writeFileSync(join(dir, "token"), token, { mode: 0o600 });
  const env = { ...process.env, OPENAGENTS_RUNNERS: join(dir, "runners.toml"), OPENAGENTS_CONFIG: join(dir, "config.toml") };
  return { dir, token, env, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export const fake = (extra = {}) => ({ command: process.execPath, args: [FAKE_AGENT], timeout_s: 20, ...extra });
export const python = (extra = {}) => ({ command: PYTHON, args: [PY_AGENT], timeout_s: 20, ...extra });

/** Runs `openagents run` to its end (bounded): exit code, stdout, stderr. */
export function run(env, cwd, args, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, ["run", ...args], { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`openagents run ${args.join(" ")} did not end in ${timeoutMs} ms; stderr: ${err}`));
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

/** The JSON events `openagents run --json` printed. */
export const events = (out) => out.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l).event);

/** Starts `openagents serve --http` for `runners` and waits for its readiness line. */
export async function serve(s, runners) {
  const args = ["serve", "--http", "--token-file", join(s.dir, "token"), "--cwd", s.dir];
  for (const r of runners) args.push("--runner", r);
  const child = spawn(BIN, args, { env: s.env, cwd: s.dir, stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const lines = createInterface({ input: child.stdout });
  const first = await Promise.race([
    new Promise((resolve) => lines.once("line", resolve)),
    exited.then((code) => {
      throw new Error(`serve exited (${code}) before its readiness line: ${err}`);
    }),
    new Promise((_, reject) => setTimeout(() => reject(new Error(`no readiness line in 20 s: ${err}`)), 20000)),
  ]);
  const { url } = JSON.parse(first);
  let id = 0;
  const rpc = async (method, params) => {
    const res = await fetch(new URL("rpc", url), {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${s.token}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: ++id, method, params }),
    });
    return res.json();
  };
  return { url, child, exited, rpc, stderr: () => err };
}

/** Whether `pid` is a live process (a zombie is not). */
export function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** Waits (bounded) until `cond()` holds. */
export async function until(cond, what, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The `key=value` fields of the fake agent's answer. */
export function fields(result) {
  const f = {};
  for (const m of result.matchAll(/(\w+)=(\S+)/g)) f[m[1]] = m[2];
  return { prompts: Number(f.prompts), session: f.session, pid: Number(f.pid), cwd: f.cwd, perm: f.perm, child: Number(f.child) };
}
