/**
 * The stdio transport (Node.js): spawns `openagents serve --stdio --runner ID` and speaks
 * JSONL-RPC over its stdin and stdout — request lines in, response lines and `{"event": …}`
 * notification lines out, every line bounded by `SERVER_MAX_LINE_BYTES`.
 */

import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";

import { TransportError } from "./error.js";
import { LocalSubscription } from "./fanout.js";
import { SERVER_MAX_LINE_BYTES } from "./generated/types.js";
import { LineReader } from "./lines.js";
import { isObject } from "./rt.js";
import { PendingReplies } from "./transport.js";
import type { EventSubscription, RequestOptions, SubscribeOptions, Transport } from "./transport.js";

/** Options for `StdioTransport.spawn`. */
export interface StdioTransportOptions {
  /**
   * The runner turns use unless a submit names another (`--runner`). `serve` serves only the
   * runners it is given: add more with `args` (`["--runner", "other"]`) for a submit to name them.
   */
  readonly runner: string;
  /** The `openagents` executable: this, else `$OPENAGENTS_BIN`, else `openagents` on the `PATH`. */
  readonly bin?: string;
  /** More arguments for `serve` (for example `["--cwd", "/work"]`). */
  readonly args?: readonly string[];
  /** The child's environment (default: this process's). It must let the operator's configuration enable the server. */
  readonly env?: NodeJS.ProcessEnv;
  /** The child's working folder. */
  readonly cwd?: string;
  /** The child's stderr: kept (the newest 64 KiB, quoted in errors; the default), passed through, or dropped. */
  readonly stderr?: "pipe" | "inherit" | "ignore";
}

/** How much of the child's stderr is kept for error messages. */
const STDERR_TAIL = 64 * 1024;

/** JSONL-RPC with a child `openagents serve --stdio`. */
export class StdioTransport implements Transport {
  /** The child process. */
  readonly child: ChildProcess;
  /** The command the runtime runs as. */
  readonly where: string;
  /** Requests awaiting their replies, each with its method. */
  private readonly pending = new PendingReplies<{ method: string }>();
  private readonly subscribers = new Set<LocalSubscription>();
  private stderrTail = "";
  private inputEnded = false;
  private exited: TransportError | null = null;
  private readonly exit: Promise<void>;

  private constructor(child: ChildProcess, where: string) {
    this.child = child;
    this.where = where;
    this.exit = new Promise<void>((resolve) => {
      child.once("error", (e) => {
        this.fail(new TransportError(`cannot run the runtime: ${e.message}`, { cause: e }));
        resolve();
      });
      child.once("close", (code, signal) => {
        const how = code !== null ? `exit code ${code}` : `signal ${signal ?? "?"}`;
        const tail = this.stderrTail.trim();
        this.fail(new TransportError(`the runtime exited (${how})${tail ? `; its stderr ends with:\n${tail}` : ""}`));
        resolve();
      });
    });
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (s: string) => {
      this.stderrTail = (this.stderrTail + s).slice(-STDERR_TAIL);
    });
    child.stdin?.on("error", () => undefined);
    void this.readLoop();
  }

  /** Starts `openagents serve --stdio --runner ID` as a child process. */
  static spawn(options: StdioTransportOptions): StdioTransport {
    const bin = options.bin ?? process.env.OPENAGENTS_BIN ?? "openagents";
    const args = ["serve", "--stdio", "--runner", options.runner, ...(options.args ?? [])];
    const child = spawn(bin, args, {
      stdio: ["pipe", "pipe", options.stderr ?? "pipe"],
      ...(options.env ? { env: options.env } : {}),
      ...(options.cwd ? { cwd: options.cwd } : {}),
    });
    return new StdioTransport(child, `\`${[bin, ...args].join(" ")}\` (stdio)`);
  }

  /** The newest bytes the runtime wrote to stderr (with `stderr: "pipe"`). */
  get stderr(): string {
    return this.stderrTail;
  }

  private fail(err: TransportError): void {
    if (this.exited) return;
    this.exited = err;
    this.pending.rejectAll(err);
    for (const s of this.subscribers) s.end();
  }

  private async readLoop(): Promise<void> {
    const stdout = this.child.stdout;
    if (!stdout) return;
    const lines = new LineReader(stdout, SERVER_MAX_LINE_BYTES);
    for (;;) {
      let line: Buffer | null;
      try {
        line = await lines.next();
      } catch (e) {
        this.fail(new TransportError(`reading the runtime's output failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e }));
        this.child.kill("SIGKILL");
        return;
      }
      if (line === null) return;
      if (line.length === 0) continue;
      let msg: unknown;
      try {
        msg = JSON.parse(line.toString("utf8")) as unknown;
      } catch {
        this.fail(new TransportError(`the runtime wrote a line that is not JSON: ${line.toString("utf8").slice(0, 200)}`));
        this.child.kill("SIGKILL");
        return;
      }
      if (!isObject(msg)) continue;
      if (!("id" in msg) && "event" in msg) {
        for (const s of this.subscribers) s.push(msg.event);
        continue;
      }
      const p = this.pending.take(msg.id);
      if (p) {
        // After `shutdown` the runtime reads no more requests; ending its input lets it exit.
        if (p.method === "shutdown" && "result" in msg) this.endInput();
        p.resolve(msg);
      }
      // A response with a null id answers a request the runtime could not read; every request
      // this transport sends is readable, so there is nobody to give it to.
    }
  }

  private endInput(): void {
    this.inputEnded = true;
    this.child.stdin?.end();
  }

  request(method: string, params: unknown, options: RequestOptions = {}): Promise<unknown> {
    if (this.exited) return Promise.reject(this.exited);
    if (this.inputEnded) return Promise.reject(new TransportError("the runtime has shut down (or is closing) and takes no more requests"));
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = this.pending.newId();
    const line = JSON.stringify(params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params });
    if (Buffer.byteLength(line) > SERVER_MAX_LINE_BYTES) {
      return Promise.reject(new TransportError(`the request is longer than SERVER_MAX_LINE_BYTES (${SERVER_MAX_LINE_BYTES} bytes)`));
    }
    return this.pending.wait(id, { method }, signal, () => this.child.stdin?.write(line + "\n"));
  }

  subscribe(options: SubscribeOptions = {}): EventSubscription {
    const sub = new LocalSubscription(() => this.subscribers.delete(sub), options.since);
    if (this.exited) {
      sub.end();
      return sub;
    }
    this.subscribers.add(sub);
    options.signal?.addEventListener("abort", () => sub.close(), { once: true });
    if (options.since === undefined) {
      // The connection's stream runs from the start: this subscriber sees every event from now.
      sub.markReady();
    } else {
      // Restart the connection's stream from `since`; each subscriber skips what it has seen.
      this.request("subscribe", { since: options.since }).then(
        (r) => (isObject(r) && r.error !== undefined ? sub.failReady(new TransportError(`subscribe was refused: ${JSON.stringify(r.error)}`)) : sub.markReady()),
        (e: unknown) => sub.failReady(e),
      );
    }
    return sub;
  }

  /** Ends the runtime: closes its stdin (it stops at end of input), then stops it if it lingers. */
  async close(): Promise<void> {
    this.endInput();
    const timer = setTimeout(() => this.child.kill("SIGTERM"), 5000);
    const hard = setTimeout(() => this.child.kill("SIGKILL"), 7000);
    await this.exit;
    clearTimeout(timer);
    clearTimeout(hard);
  }
}
