/** Shared test helpers: paths, a temporary operator setup, and a real `openagents serve --http`. */

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { isKnownRuntimeEvent } from "@openagents/client";
import type { OpenAgentsClient, ServerEvent } from "@openagents/client";

/** `clients/typescript/` (tests run from `build/test/`). */
export const PKG = resolve(fileURLToPath(new URL("../../", import.meta.url)));
/** The repository root. */
export const ROOT = resolve(PKG, "../..");
/** The `openagents` binary under test. */
export const BIN = process.env.OPENAGENTS_BIN ?? join(ROOT, "target/debug/openagents");
/** The Rust echo runner. */
export const RUST_ECHO = join(ROOT, "target/debug/openagents-runner-echo");
/** The Rust `ask` runner: asks for approval to do its task; completes when approved, fails when denied. */
export const RUST_ASK = join(ROOT, "target/debug/openagents-runner-ask");
/** The TypeScript echo runner. */
export const TS_ECHO = join(PKG, "examples/echo-runner.mjs");
/** A runner whose task says what to do (see the file). */
export const BEHAVE = join(PKG, "test/fixtures/behave-runner.mjs");

if (!existsSync(BIN)) {
  throw new Error(`${BIN} is missing: build it with \`cargo build -p openagents-cli -p openagents-runner\` (run-tests.sh does)`);
}

/** A temporary operator configuration (server enabled) and runner registry. */
export class Setup {
  readonly dir: string;
  constructor(name: string, options: { enabled?: boolean } = {}) {
    this.dir = mkdtempSync(join(tmpdir(), `openagents-ts-${name}-`));
    writeFileSync(join(this.dir, "config.toml"), `[capabilities.server]\nenabled = ${options.enabled ?? true}\n`);
    const node = JSON.stringify(process.execPath);
    writeFileSync(
      join(this.dir, "runners.toml"),
      [
        `[runners.echo]\ncommand = ${JSON.stringify(RUST_ECHO)}\n`,
        `[runners.echo-ts]\ncommand = ${node}\nargs = [${JSON.stringify(TS_ECHO)}]\n`,
        `[runners.behave]\ncommand = ${node}\nargs = [${JSON.stringify(BEHAVE)}]\ntimeout_s = 30\n`,
        `[runners.ask]\ncommand = ${JSON.stringify(RUST_ASK)}\ntimeout_s = 30\n`,
      ].join("\n"),
    );
  }

  /** The environment every `openagents` child gets. */
  get env(): NodeJS.ProcessEnv {
    return {
      ...process.env,
      OPENAGENTS_CONFIG: join(this.dir, "config.toml"),
      OPENAGENTS_RUNNERS: join(this.dir, "runners.toml"),
      XDG_RUNTIME_DIR: this.dir,
    };
  }

  /** Runs `openagents ARGS` to completion. */
  run(args: string[], input?: string): { code: number | null; stdout: string; stderr: string } {
    const r = spawnSync(BIN, args, { env: this.env, cwd: this.dir, input: input ?? "", encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A running `openagents serve --http`. */
export interface HttpServer {
  readonly url: string;
  readonly token: string;
  /** The file the token is in, as the readiness line names it. */
  readonly tokenFile: string;
  readonly child: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts `openagents serve --http --runner RUNNER` and waits for its readiness line. */
export async function startHttp(setup: Setup, runner: string, extra: string[] = []): Promise<HttpServer> {
  const child = spawn(BIN, ["serve", "--http", "--runner", runner, "--cwd", setup.dir, ...extra], { env: setup.env, cwd: setup.dir, stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (s: string) => (err += s));
  const rl = createInterface({ input: child.stdout! });
  const line = await new Promise<string>((resolveLine, reject) => {
    rl.once("line", resolveLine);
    child.once("exit", (code) => reject(new Error(`serve --http exited (${code}) before it was ready: ${err}`)));
  });
  rl.close();
  const ready = JSON.parse(line) as { url: string; token_file: string };
  const token = readFileSync(ready.token_file, "utf8").trim();
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  return {
    url: ready.url,
    token,
    tokenFile: ready.token_file,
    child,
    stderr: () => err,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Waits until the runtime `client` talks to is idle (a turn ended on the runner's side too). */
export async function waitIdle(client: OpenAgentsClient): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await client.status()).state === "idle") return;
    await sleep(25);
  }
  throw new Error("the runtime did not become idle");
}

/**
 * Subscribes from a resume point `ahead` past the runtime's newest event (as a client of an
 * earlier run of a restarted runtime would) and reads until that newest event, for at most
 * 10 s. Checks what the runtime documents: a `gap` first (`since` the asked point, `resumed_at`
 * the oldest event held - 1), then every event it holds, in order, once.
 */
export async function checkResumeAhead(client: OpenAgentsClient, ahead = 100): Promise<void> {
  await waitIdle(client);
  const last = (await client.status()).last_seq;
  assert.ok(last > 0, "the runtime has events to replay");
  const since = last + ahead;
  const seen: ServerEvent[] = [];
  const stream = client.events({ since, signal: AbortSignal.timeout(10_000) });
  await stream.ready;
  for await (const ev of stream) {
    seen.push(ev);
    if (ev.seq >= last && ev.event.type !== "gap") break;
  }
  const gap = seen[0]?.event;
  assert.ok(gap !== undefined && isKnownRuntimeEvent(gap) && gap.type === "gap", `a gap first: ${JSON.stringify(seen[0])}`);
  assert.equal(gap.since, since);
  assert.ok(gap.resumed_at >= 0 && gap.resumed_at < last, `resumed_at ${gap.resumed_at}`);
  const expected = Array.from({ length: last - gap.resumed_at }, (_, i) => gap.resumed_at + 1 + i);
  assert.deepEqual(seen.slice(1).map((e) => e.seq), expected, "every event held, in order, once");
}

/** A small deterministic generator (xorshift), so failures reproduce. */
export function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x100000000;
  };
}

/** Compiles, with `tsc --strict`, the generated modules under `work/<name>/src/` (each beside its
 * own copy of `rt.ts`) into `work/out/`; `what` names them in the failure. */
export function compileGenerated(work: string, what: string): void {
  writeFileSync(join(work, "package.json"), JSON.stringify({ type: "module" }));
  writeFileSync(
    join(work, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2022", "DOM"], types: [], strict: true, noImplicitOverride: true, verbatimModuleSyntax: true, outDir: "out", rootDir: "." },
      include: ["*/src/**/*.ts"],
    }),
  );
  const tsc = spawnSync(process.execPath, [join(PKG, "node_modules/typescript/bin/tsc"), "-p", join(work, "tsconfig.json")], { encoding: "utf8" });
  assert.equal(tsc.status, 0, `tsc --strict on ${what}:\n${tsc.stdout}${tsc.stderr}`);
}
