/**
 * An incremental parser for Server-Sent Events (the `text/event-stream` format of the HTML
 * standard): bytes in, events out, with a bound on how much one event may hold.
 */

/** One event of the stream. */
export interface SseMessage {
  /** The `id:` field, when the event set one. */
  readonly id: string | undefined;
  /** The `event:` field (`message` when absent). */
  readonly event: string;
  /** The `data:` lines, joined with `\n`. */
  readonly data: string;
}

/** The stream broke a bound: an event (or a line) larger than the limit. */
export class SseLimitError extends Error {
  constructor(limit: number) {
    super(`an event-stream line or event is larger than ${limit} bytes`);
    this.name = "SseLimitError";
  }
}

/** Parses an event stream fed in chunks of any size. */
export class SseParser {
  private readonly decoder = new TextDecoder("utf-8");
  private readonly limit: number;
  private buffer = "";
  private data: string[] = [];
  private dataSize = 0;
  private id: string | undefined = undefined;
  private event = "";
  private skipLf = false;
  private first = true;

  /** `limit`: the most characters one line or one event's data may hold. */
  constructor(limit: number) {
    this.limit = limit;
  }

  /** Feeds bytes; returns the events they complete. */
  push(chunk: Uint8Array): SseMessage[] {
    return this.feed(this.decoder.decode(chunk, { stream: true }));
  }

  /** Ends the stream; an event without its closing blank line is dropped, as the standard says. */
  end(): SseMessage[] {
    return this.feed(this.decoder.decode());
  }

  private feed(text: string): SseMessage[] {
    const out: SseMessage[] = [];
    let s = this.buffer + text;
    if (this.first && s.length > 0) {
      if (s.charCodeAt(0) === 0xfeff) s = s.slice(1);
      this.first = false;
    }
    let start = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      if (c === 10 && this.skipLf && i === start) {
        // The `\n` of a `\r\n` split across chunks.
        this.skipLf = false;
        start = i + 1;
        continue;
      }
      this.skipLf = false;
      this.line(s.slice(start, i), out);
      if (c === 13) {
        if (i + 1 < s.length) {
          if (s.charCodeAt(i + 1) === 10) i++;
        } else {
          this.skipLf = true;
        }
      }
      start = i + 1;
    }
    this.buffer = s.slice(start);
    if (this.buffer.length > 0) this.skipLf = false;
    if (this.buffer.length > this.limit) throw new SseLimitError(this.limit);
    return out;
  }

  private line(line: string, out: SseMessage[]): void {
    if (line === "") {
      if (this.data.length > 0) out.push({ id: this.id, event: this.event || "message", data: this.data.join("\n") });
      this.data = [];
      this.dataSize = 0;
      this.event = "";
      return;
    }
    if (line.charCodeAt(0) === 58) return; // `:` a comment (keep-alive).
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case "data":
        this.dataSize += value.length + 1;
        if (this.dataSize > this.limit) throw new SseLimitError(this.limit);
        this.data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.id = value;
        break;
      case "event":
        this.event = value;
        break;
      default:
        break; // `retry` and unknown fields: ignored.
    }
  }
}
