/**
 * The runner side of the contract, for runners written for Node.js: read one bounded `Turn`,
 * run the application, write bounded events, and always end with exactly one terminal event.
 * The same bounds and validation as the Rust `openagents_runner::serve`.
 *
 * ```js
 * import { serveStreaming } from "@openagents/client/runner";
 * await serveStreaming(async (turn, progress) => {
 *   for (const word of turn.task.split(/\s+/)) await progress.text(word);
 *   return turn.task;
 * });
 * ```
 *
 * Logs belong on stderr; stdout carries only events. The host stops the process when the user
 * stops the turn.
 */

import type { Readable, Writable } from "node:stream";

import { MAX_FRAME, MAX_OUTPUT, VERSION } from "./generated/types.js";
import type { ApprovalAnswer, Event, Turn } from "./generated/types.js";
import { validateApprovalAnswer, validateTurn } from "./generated/validators.js";
import { LineReader, LineTooLongError } from "./lines.js";

export type { Turn };

/** Where a runner reads its turn and writes its events (stdin and stdout by default). */
export interface RunnerIo {
  /** The host's side: one turn line, then one line per approval answer. */
  readonly input?: Readable;
  /** Event lines go here. */
  readonly output?: Writable;
}

/** Application code for `serveOnce`: the result, or throw to fail the turn (the message is sent). */
export type RunOnce = (turn: Turn) => string | Promise<string>;

/** Application code for `serveStreaming`: report progress through `progress`. */
export type RunStreaming = (turn: Turn, progress: Progress) => string | Promise<string>;

/** Room kept for the terminal event: one full line and its newline. */
const TERMINAL_RESERVE = MAX_FRAME + 1;

/** Why a progress event (or an approval request) was not written or answered. */
export class ProgressError extends Error {
  /**
   * `line_too_long`: the event would be a line longer than `MAX_FRAME`; send smaller pieces.
   * `output_full`: the turn's output would exceed `MAX_OUTPUT` (room for the terminal event is kept).
   * `not_unicode`: the text holds a lone surrogate, which JSON on the wire cannot carry.
   * `io`: writing failed (the host has gone away).
   * `no_answer`: the host did not answer an approval request.
   * `ended`: the turn has already ended.
   */
  readonly kind: "line_too_long" | "output_full" | "not_unicode" | "io" | "no_answer" | "ended";
  constructor(kind: ProgressError["kind"], message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ProgressError";
    this.kind = kind;
  }
}

/** The host's answer to `Progress.ask`. */
export interface Answer {
  /** Whether the runner may go ahead. With nobody authorised to answer, this is `false`. */
  readonly approved: boolean;
  /** A free-form answer, when the person gave one. */
  readonly answer?: string;
}

/** Reads one bounded JSON request, runs `run`, and writes one `completed` or `failed` line. */
export async function serveOnce(run: RunOnce, io: RunnerIo = {}): Promise<void> {
  await serveStreaming((turn) => run(turn), io);
}

/**
 * `serveOnce` for runners that report progress: `run` gets a `Progress` to write `text` events
 * with (and to ask the host for approval), which refuses to exceed `MAX_OUTPUT` in total.
 *
 * Reads at most `MAX_FRAME` bytes up to the first newline (a longer request is refused without
 * being buffered whole), parses and validates the `Turn`, calls `run`, and writes exactly one
 * terminal event, never a line longer than `MAX_FRAME`: a result too large becomes a `failed`
 * event saying so. Every problem with the request is answered with a `failed` event; the
 * returned promise rejects only when writing to the output fails.
 */
export async function serveStreaming(run: RunStreaming, io: RunnerIo = {}): Promise<void> {
  const input = io.input ?? process.stdin;
  const output = io.output ?? process.stdout;
  const lines = new LineReader(input, MAX_FRAME);
  const progress = new Progress(output, lines);
  // A host that has gone away fails the writes (their callbacks say so); without a listener the
  // same error would also crash the process.
  const ignore = (): void => undefined;
  output.on("error", ignore);
  let outcome: { ok: true; result: string } | { ok: false; message: string };
  try {
    const turn = await readTurn(lines);
    if (typeof turn === "string") {
      outcome = { ok: false, message: turn };
    } else {
      const result: unknown = await run(turn, progress);
      outcome = typeof result === "string" ? { ok: true, result } : { ok: false, message: `the runner's result is ${typeof result}, not a string` };
    }
  } catch (e) {
    outcome = { ok: false, message: e instanceof Error ? e.message : String(e) };
  } finally {
    progress.end();
    lines.release();
    // Nothing more is read: let the process exit once the terminal event is out.
    if (input === process.stdin) input.destroy();
  }
  try {
    await writeLine(output, terminalLine(outcome));
  } finally {
    output.off("error", ignore);
  }
}

/** Writes `text` events for a streaming runner within the contract's bounds, and asks the host for approval. */
export class Progress {
  private readonly out: Writable;
  private readonly lines: LineReader;
  private bytes = 0;
  private asked = 0;
  private done = false;
  /** Serializes writes, so events keep their order and the byte count stays exact. */
  private queue: Promise<void> = Promise.resolve();

  /** @internal */
  constructor(out: Writable, lines: LineReader) {
    this.out = out;
    this.lines = lines;
  }

  /** Bytes written so far, newlines included. */
  get written(): number {
    return this.bytes;
  }

  /** @internal */
  end(): void {
    this.done = true;
  }

  /**
   * Writes one `text` event and resolves once it is handed to the output, so the host sees
   * progress as it happens.
   *
   * @throws ProgressError when the event would break a bound (nothing is written), or on I/O.
   */
  text(text: string): Promise<void> {
    return this.emit({ type: "text", text });
  }

  /**
   * Asks the host for approval and waits for its answer. Approvals fail closed: when nobody
   * authorised can answer, the answer is a denial. Runners that never ask never read stdin past
   * the turn.
   *
   * @throws ProgressError when the request would break a bound, on I/O, or when the host does
   *   not answer.
   */
  async ask(prompt: string): Promise<Answer> {
    this.asked += 1;
    const id = `ask-${this.asked}`;
    await this.emit({ type: "approval_request", id, prompt });
    let line: Buffer | null;
    try {
      line = await this.lines.next();
    } catch (e) {
      throw new ProgressError("no_answer", `the host did not answer the approval request: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    if (line === null) throw new ProgressError("no_answer", "the host did not answer the approval request: stdin ended");
    const parsed = parseJson(line);
    if (!parsed.ok) throw new ProgressError("no_answer", `the host did not answer the approval request: not JSON: ${parsed.message}`);
    const violations = validateApprovalAnswer(parsed.value);
    if (violations.length > 0) {
      throw new ProgressError("no_answer", `the host did not answer the approval request: ${violations.map(showViolation).join("; ")}`);
    }
    const a = parsed.value as ApprovalAnswer;
    if (a.id !== id) throw new ProgressError("no_answer", `the host did not answer the approval request: the answer is for \`${a.id}\`, not \`${id}\``);
    return a.answer === undefined ? { approved: a.approved } : { approved: a.approved, answer: a.answer };
  }

  private emit(event: Event): Promise<void> {
    const run = async (): Promise<void> => {
      if (this.done) throw new ProgressError("ended", "the turn has ended; no more events can be written");
      const text = event.type === "text" ? event.text : event.type === "approval_request" ? event.prompt : "";
      const bad = loneSurrogate(text);
      if (bad >= 0) throw new ProgressError("not_unicode", `the text has a lone surrogate at index ${bad}; JSON on the wire cannot carry it`);
      const line = JSON.stringify(event);
      const size = Buffer.byteLength(line);
      if (size > MAX_FRAME) {
        throw new ProgressError("line_too_long", `a progress event of ${size} bytes is longer than MAX_FRAME (${MAX_FRAME} bytes); send it in smaller pieces`);
      }
      if (this.bytes + size + 1 > MAX_OUTPUT - TERMINAL_RESERVE) {
        throw new ProgressError("output_full", `the turn's output would exceed MAX_OUTPUT (${MAX_OUTPUT} bytes)`);
      }
      this.bytes += size + 1;
      try {
        await writeLine(this.out, line);
      } catch (e) {
        throw new ProgressError("io", `writing progress failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      }
    };
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }
}

function showViolation(v: { pointer: string; message: string }): string {
  return `${v.pointer || "(root)"}: ${v.message}`;
}

function parseJson(bytes: Buffer): { ok: true; value: unknown } | { ok: false; message: string } {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return { ok: false, message: "invalid UTF-8" };
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    return { ok: false, message: e instanceof Error ? e.message : String(e) };
  }
}

/** Reads and validates the request line: the turn, or what is wrong with it. */
async function readTurn(lines: LineReader): Promise<Turn | string> {
  let line: Buffer | null;
  try {
    line = await lines.next();
  } catch (e) {
    if (e instanceof LineTooLongError) return `the request line is longer than MAX_FRAME (${e.limit} bytes); it was refused unread`;
    return `reading the request failed: ${e instanceof Error ? e.message : String(e)}`;
  }
  if (line === null) return "no request: stdin ended before a turn line";
  const parsed = parseJson(line);
  if (!parsed.ok) return `the request is not JSON: ${parsed.message}`;
  const violations = validateTurn(parsed.value);
  if (violations.length === 0) return parsed.value as Turn;
  if (violations.some((v) => v.pointer === "/schema" && v.keyword === "const")) {
    const found = JSON.stringify((parsed.value as { schema?: unknown }).schema);
    return `unsupported turn schema ${found}: this runner speaks "${VERSION}"`;
  }
  return `the request is not a valid turn: ${violations.map(showViolation).join("; ")}`;
}

/** The terminal event's line, never longer than `MAX_FRAME`. */
function terminalLine(outcome: { ok: true; result: string } | { ok: false; message: string }): string {
  const text = outcome.ok ? outcome.result : outcome.message;
  const what = outcome.ok ? "result" : "failure message";
  const bad = loneSurrogate(text);
  if (bad >= 0) {
    return JSON.stringify({ type: "failed", message: `the ${what} has a lone surrogate at index ${bad}; JSON on the wire cannot carry it` } satisfies Event);
  }
  const event: Event = outcome.ok ? { type: "completed", result: outcome.result } : { type: "failed", message: outcome.message };
  const line = JSON.stringify(event);
  const size = Buffer.byteLength(line);
  if (size <= MAX_FRAME) return line;
  const message = `the ${what} is too large: ${size} bytes encoded, and a line may be at most MAX_FRAME (${MAX_FRAME}) bytes`;
  return JSON.stringify({ type: "failed", message } satisfies Event);
}

/** The index of the first lone surrogate in `s`, or -1. */
function loneSurrogate(s: string): number {
  for (let i = 0; i < s.length; i++) {
    const u = s.charCodeAt(i);
    if (u < 0xd800 || u > 0xdfff) continue;
    if (u <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      i++;
      continue;
    }
    return i;
  }
  return -1;
}

function writeLine(out: Writable, line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    out.write(line + "\n", (err) => (err ? reject(err) : resolve()));
  });
}
