/**
 * The HTTP transport: `POST /rpc` with one request per call (`fetch`), and `GET /events` as
 * Server-Sent Events read from a streaming response, resumed with `Last-Event-ID` after a
 * dropped connection. Every request carries `Authorization: Bearer <token>`. Works wherever
 * `fetch` streams response bodies (Node.js 18+, browsers, Deno, Bun).
 *
 * In a browser, events come over the WebSocket `/frontend/v2` (`subscribe`) instead: a browser's
 * `EventSource` cannot send the `Authorization` header, and the token never goes in a URL. The
 * `events` option chooses explicitly.
 */

import { TransportError } from "./error.js";
import { SERVER_MAX_LINE_BYTES } from "./generated/types.js";
import { isObject } from "./rt.js";
import { SseLimitError, SseParser } from "./sse.js";
import { identityFromHeaders, RefusedByRuntime } from "./transport.js";
import type { EventSubscription, RequestOptions, RuntimeIdentity, SubscribeOptions, Transport } from "./transport.js";
import { WebSocketTransport } from "./websocket.js";
import type { WebSocketConstructor } from "./websocket.js";

/** Whether this runs in a browser page (a `document` and a global `WebSocket`). */
function inBrowser(): boolean {
  const g = globalThis as { document?: unknown; WebSocket?: unknown };
  return typeof g.document === "object" && g.document !== null && typeof g.WebSocket === "function";
}

/** Options for `HttpTransport`. */
export interface HttpTransportOptions {
  /** The runtime's base URL, as `openagents serve --http` prints it (`http://127.0.0.1:PORT/`). */
  readonly url: string | URL;
  /** The bearer token. */
  readonly token: string;
  /** The `fetch` to use (default: the global one). */
  readonly fetch?: typeof fetch;
  /** How many times in a row a dropped event stream is reconnected before the subscription fails (default 5). */
  readonly maxReconnects?: number;
  /** The first delay before reconnecting, in milliseconds; doubled each time up to 2 s (default 100). */
  readonly reconnectDelayMs?: number;
  /**
   * How `subscribe` gets events: `"sse"` (`GET /events` with the `Authorization` header) or
   * `"websocket"` (`subscribe` on `/frontend/v2`, the token in the bearer subprotocol; one socket
   * for every subscription, opened on the first). Default: `"websocket"` in a browser, else `"sse"`.
   */
  readonly events?: "sse" | "websocket";
  /** The `WebSocket` constructor for `events: "websocket"` (default: the global one). */
  readonly WebSocket?: WebSocketConstructor;
}

/** `POST /rpc` and `GET /events` on one runtime. */
export class HttpTransport implements Transport {
  private readonly rpcUrl: URL;
  private readonly eventsUrl: URL;
  private readonly auth: string;
  private readonly fetchFn: typeof fetch;
  private readonly maxReconnects: number;
  private readonly reconnectDelayMs: number;
  private nextId = 1;
  private readonly subscriptions = new Set<SseSubscription>();
  private readonly identityListeners: ((identity: RuntimeIdentity) => void)[] = [];
  /** The runtime's base URL. */
  readonly where: string;
  /** Every response's headers say the runtime's schema digest and protocol version. */
  readonly reportsIdentity = true;
  /** Where events come from (see the `events` option). */
  readonly eventsVia: "sse" | "websocket";
  private readonly token: string;
  private readonly WebSocketCtor: WebSocketConstructor | undefined;
  /** The socket events come over with `events: "websocket"`, once opened (a new one after it closes). */
  private socket: WebSocketTransport | null = null;

  constructor(options: HttpTransportOptions) {
    const base = new URL(options.url);
    if (!base.pathname.endsWith("/")) base.pathname += "/";
    this.rpcUrl = new URL("rpc", base);
    this.eventsUrl = new URL("events", base);
    this.where = base.href;
    this.auth = `Bearer ${options.token}`;
    this.fetchFn = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.maxReconnects = options.maxReconnects ?? 5;
    this.reconnectDelayMs = options.reconnectDelayMs ?? 100;
    this.eventsVia = options.events ?? (inBrowser() ? "websocket" : "sse");
    this.token = options.token;
    this.WebSocketCtor = options.WebSocket;
  }

  async request(method: string, params: unknown, options: RequestOptions = {}): Promise<unknown> {
    const id = this.nextId++;
    const body = JSON.stringify(params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params });
    let response: Response;
    try {
      response = await this.fetchFn(this.rpcUrl, {
        method: "POST",
        headers: { authorization: this.auth, "content-type": "application/json", accept: "application/json" },
        body,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (e) {
      if (options.signal?.aborted) throw e;
      throw new TransportError(`cannot reach ${this.rpcUrl.href}: ${describe(e)}`, { cause: e });
    }
    this.stateIdentity(response);
    const text = await readBounded(response, SERVER_MAX_LINE_BYTES);
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new TransportError(`POST ${this.rpcUrl.pathname} answered HTTP ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`);
    }
  }

  watchIdentity(listener: (identity: RuntimeIdentity) => void): void {
    this.identityListeners.push(listener);
  }

  private stateIdentity(response: Response): void {
    if (this.identityListeners.length === 0) return;
    const identity = identityFromHeaders((name) => response.headers.get(name), "HTTP response headers");
    for (const l of this.identityListeners) l(identity);
  }

  subscribe(options: SubscribeOptions = {}): EventSubscription {
    if (this.eventsVia === "websocket") return this.eventSocket().subscribe(options);
    const sub = new SseSubscription(this, options, () => this.subscriptions.delete(sub));
    this.subscriptions.add(sub);
    return sub;
  }

  /** The socket for `events: "websocket"`. It does not reconnect: a dropped one ends its subscriptions, and the next `subscribe` (with `since`) opens a new one. */
  private eventSocket(): WebSocketTransport {
    if (this.socket) return this.socket;
    const socket = new WebSocketTransport({ url: this.where, token: this.token, ...(this.WebSocketCtor ? { WebSocket: this.WebSocketCtor } : {}) });
    this.socket = socket;
    void socket.closed.then(() => {
      if (this.socket === socket) this.socket = null;
    });
    return socket;
  }

  async close(): Promise<void> {
    for (const s of [...this.subscriptions]) s.close();
    const socket = this.socket;
    this.socket = null;
    if (socket) await socket.close();
  }

  /** @internal */
  async openEvents(lastEventId: number | undefined, signal: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { authorization: this.auth, accept: "text/event-stream" };
    if (lastEventId !== undefined) headers["last-event-id"] = String(lastEventId);
    const response = await this.fetchFn(this.eventsUrl, { headers, signal, cache: "no-store" });
    this.stateIdentity(response);
    return response;
  }

  /** @internal */
  get reconnectPolicy(): { max: number; delayMs: number } {
    return { max: this.maxReconnects, delayMs: this.reconnectDelayMs };
  }
}

function describe(e: unknown): string {
  if (e instanceof Error) {
    const cause = (e as { cause?: unknown }).cause;
    return cause instanceof Error ? `${e.message} (${cause.message})` : e.message;
  }
  return String(e);
}

/** Reads a response body as text, refusing one larger than `limit` bytes without holding more. */
async function readBounded(response: Response, limit: number): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let size = 0;
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw new TransportError(`the response is larger than SERVER_MAX_LINE_BYTES (${limit} bytes)`);
    }
    text += decoder.decode(value, { stream: true });
  }
  return text + decoder.decode();
}

/** The last event of a runtime: the stream ends after it. */
function isFinal(ev: unknown): boolean {
  return isObject(ev) && isObject(ev.event) && ev.event.type === "shutting_down";
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * One `GET /events` subscription, pulled by its iterator (a slow reader slows the socket, and
 * the runtime tells it with `lagged` what it missed). A dropped stream is reopened with
 * `Last-Event-ID` set to the last event seen, so no event is delivered twice or skipped while
 * the runtime still holds it (else the runtime sends a `gap`).
 */
class SseSubscription implements EventSubscription {
  readonly ready: Promise<void>;
  private readonly transport: HttpTransport;
  private readonly abort = new AbortController();
  private readonly onClose: () => void;
  private lastId: number | undefined;
  private first: Promise<Response> | null;
  private markReady!: () => void;
  private failReady!: (e: unknown) => void;
  private iterating = false;

  constructor(transport: HttpTransport, options: SubscribeOptions, onClose: () => void) {
    this.transport = transport;
    this.onClose = onClose;
    this.lastId = options.since;
    this.ready = new Promise<void>((resolve, reject) => {
      this.markReady = resolve;
      this.failReady = reject;
    });
    // Nobody has to await `ready`: keep an unobserved failure from being reported as unhandled.
    this.ready.catch(() => undefined);
    if (options.signal) {
      if (options.signal.aborted) this.abort.abort();
      else options.signal.addEventListener("abort", () => this.close(), { once: true });
    }
    // Connect at once, so `ready` means the runtime has registered this subscription.
    this.first = this.connect();
    this.first.then(
      () => this.markReady(),
      (e: unknown) => this.failReady(e instanceof RefusedByRuntime || e instanceof TransportError ? e : new TransportError(`cannot open the event stream: ${describe(e)}`, { cause: e })),
    );
  }

  close(): void {
    if (!this.abort.signal.aborted) this.abort.abort();
    this.failReady(new TransportError("the subscription was closed before it connected"));
    this.onClose();
  }

  private async connect(): Promise<Response> {
    const response = await this.transport.openEvents(this.lastId, this.abort.signal);
    if (!response.ok) {
      const text = await readBounded(response, 64 * 1024).catch(() => "");
      let body: unknown;
      try {
        body = JSON.parse(text) as unknown;
      } catch {
        body = undefined;
      }
      throw new RefusedByRuntime(`GET /events answered HTTP ${response.status}: ${text.slice(0, 200)}`, body, response.status);
    }
    return response;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<unknown> {
    if (this.iterating) throw new TransportError("an event subscription can be iterated only once");
    this.iterating = true;
    const { max, delayMs } = this.transport.reconnectPolicy;
    let failures = 0;
    let delay = delayMs;
    try {
      while (!this.abort.signal.aborted) {
        let response: Response;
        try {
          response = await (this.first ?? this.connect());
        } catch (e) {
          this.first = null;
          if (this.abort.signal.aborted) return;
          if (e instanceof RefusedByRuntime) {
            this.failReady(e);
            throw e;
          }
          failures += 1;
          if (failures > max) {
            const err = new TransportError(`the event stream could not be (re)opened after ${max} retries: ${describe(e)}`, { cause: e });
            this.failReady(err);
            throw err;
          }
          await sleep(delay, this.abort.signal);
          delay = Math.min(delay * 2, 2000);
          continue;
        }
        this.first = null;
        this.markReady();
        const body = response.body;
        if (!body) throw new TransportError("GET /events answered without a body");
        const reader = body.getReader();
        const parser = new SseParser(SERVER_MAX_LINE_BYTES);
        try {
          for (;;) {
            let chunk: ReadableStreamReadResult<Uint8Array>;
            try {
              chunk = await reader.read();
            } catch (e) {
              if (this.abort.signal.aborted) return;
              break; // Dropped: reconnect from the last event seen.
            }
            const messages = chunk.done ? parser.end() : parser.push(chunk.value);
            for (const m of messages) {
              // A connection that delivers events is healthy again.
              failures = 0;
              delay = delayMs;
              let ev: unknown;
              try {
                ev = JSON.parse(m.data) as unknown;
              } catch {
                throw new TransportError(`an event is not JSON: ${m.data.slice(0, 200)}`);
              }
              const id = m.id === undefined ? NaN : Number(m.id);
              if (Number.isSafeInteger(id)) this.lastId = id;
              yield ev;
              if (isFinal(ev)) return;
            }
            if (chunk.done) break;
          }
        } catch (e) {
          if (e instanceof SseLimitError) throw new TransportError(e.message, { cause: e });
          throw e;
        } finally {
          reader.cancel().catch(() => undefined);
        }
        // Dropped: reconnect from the last event seen — at once after a connection that delivered
        // events, else with backoff, counted against the retries.
        failures += 1;
        if (failures > max) throw new TransportError(`the event stream keeps ending without events; gave up after ${max} retries`);
        if (failures > 1) {
          await sleep(delay, this.abort.signal);
          delay = Math.min(delay * 2, 2000);
        }
      }
    } finally {
      this.close();
    }
  }
}
