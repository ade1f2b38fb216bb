/**
 * Bounded line framing over a Node.js readable stream: one line at a time, never holding more
 * than the limit of a line that has not ended, so a peer that never sends a newline cannot make
 * this side buffer an unbounded amount. Node.js only.
 */

import type { Readable } from "node:stream";

/** Why a line could not be read. */
export class LineTooLongError extends Error {
  /** The limit, in bytes, excluding the newline. */
  readonly limit: number;
  constructor(limit: number) {
    super(`line longer than ${limit} bytes`);
    this.name = "LineTooLongError";
    this.limit = limit;
  }
}

/**
 * Reads lines (without their `\n`, and without a `\r` before it) of at most `limit` bytes from a
 * stream, pulling only as much as it needs. A last line without a newline counts as a line.
 */
export class LineReader {
  private readonly input: Readable;
  private readonly limit: number;
  /** Bytes read but not yet returned: the start of the next line (at most `limit + 1` bytes of it). */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes of the chunk in hand after the current line (a chunk may hold several lines). */
  private rest: Buffer | null = null;
  private ended = false;
  private failed: Error | null = null;
  private waiter: (() => void) | null = null;

  constructor(input: Readable, limit: number) {
    this.input = input;
    this.limit = limit;
    input.on("readable", this.wake);
    input.on("end", this.onEnd);
    input.on("error", this.onError);
  }

  private readonly wake = (): void => {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  };
  private readonly onEnd = (): void => {
    this.ended = true;
    this.wake();
  };
  private readonly onError = (e: Error): void => {
    this.failed = e;
    this.wake();
  };

  private nextChunk(): Buffer | null {
    if (this.rest) {
      const r = this.rest;
      this.rest = null;
      return r;
    }
    const c: unknown = this.input.read();
    if (c === null) return null;
    return typeof c === "string" ? Buffer.from(c) : (c as Buffer);
  }

  /**
   * The next line; `null` at end of input.
   *
   * @throws LineTooLongError as soon as more than `limit` bytes arrive without a newline (the
   *   reader is then left inside that line), or the stream's error.
   */
  async next(): Promise<Buffer | null> {
    for (;;) {
      const chunk = this.nextChunk();
      if (chunk === null) {
        if (this.failed) throw this.failed;
        if (this.ended || this.input.readableEnded || this.input.destroyed) {
          if (this.pendingBytes === 0) return null;
          if (this.pendingBytes > this.limit) {
            this.dropPending();
            throw new LineTooLongError(this.limit);
          }
          return this.take(Buffer.alloc(0));
        }
        await new Promise<void>((resolve) => {
          this.waiter = resolve;
        });
        continue;
      }
      const nl = chunk.indexOf(10);
      if (nl === -1) {
        this.pending.push(chunk);
        this.pendingBytes += chunk.length;
        // One byte past the limit is still fine if it is the `\r` of a `\r\n`.
        const last = chunk[chunk.length - 1];
        if (this.pendingBytes > this.limit + 1 || (this.pendingBytes === this.limit + 1 && last !== 13)) {
          this.dropPending();
          throw new LineTooLongError(this.limit);
        }
        continue;
      }
      const head = chunk.subarray(0, nl);
      const tail = chunk.subarray(nl + 1);
      if (tail.length > 0) this.rest = tail;
      const total = this.pendingBytes + head.length;
      const endsCr = total > 0 && (head.length > 0 ? head[head.length - 1] === 13 : this.lastPendingByte() === 13);
      if (total > this.limit + (endsCr ? 1 : 0)) {
        this.dropPending();
        throw new LineTooLongError(this.limit);
      }
      return this.take(head);
    }
  }

  private lastPendingByte(): number | undefined {
    const b = this.pending[this.pending.length - 1];
    return b === undefined ? undefined : b[b.length - 1];
  }

  private dropPending(): void {
    this.pending = [];
    this.pendingBytes = 0;
  }

  private take(head: Buffer): Buffer {
    let line = this.pending.length === 0 ? head : Buffer.concat([...this.pending, head]);
    this.dropPending();
    if (line.length > 0 && line[line.length - 1] === 13) line = line.subarray(0, line.length - 1);
    return line;
  }

  /** Stops reading: detaches from the stream (which is left as it is). */
  release(): void {
    this.input.off("readable", this.wake);
    this.input.off("end", this.onEnd);
    this.input.off("error", this.onError);
    if (this.rest) {
      this.input.unshift(this.rest);
      this.rest = null;
    }
  }
}
