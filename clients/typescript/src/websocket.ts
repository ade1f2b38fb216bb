/**
 * The WebSocket transport, `/frontend/v2`: JSON-RPC 2.0 both ways, one message per text frame.
 * Requests go out with numeric ids and are matched to their responses; after `subscribe` the
 * runtime pushes events as `frontend.v2.event` notifications; the agent's approval requests
 * arrive as `frontend.v2.approval` requests, answered by the `onApproval` handler (a denial when
 * there is none, or it fails: approvals fail closed).
 *
 * Browser-safe: it takes a WHATWG `WebSocket` constructor (the global one by default) and
 * authenticates with the subprotocols `openagents.v2` and `openagents.bearer.<token>`, since a
 * browser cannot set headers. `connectWebSocket` in `@openagents/client/node` opens the socket
 * with `ws` instead, sending `Authorization: Bearer` and reading the handshake's headers.
 */

import { TransportError } from "./error.js";
import { LocalSubscription } from "./fanout.js";
import type { ApprovalPrompt, ApprovalReply } from "./generated/types.js";
import { SERVER_MAX_LINE_BYTES } from "./generated/types.js";
import { validateApprovalReply, validateFrontendApprovalRequest } from "./generated/validators.js";
import { isObject } from "./rt.js";
import { identityFromHeaders, PendingReplies, RefusedByRuntime } from "./transport.js";
import type { EventSubscription, RequestOptions, RuntimeIdentity, SubscribeOptions, Transport } from "./transport.js";

/** The only WebSocket path a runtime serves. */
export const FRONTEND_PATH = "frontend/v2";
/** The subprotocol a runtime answers with. */
export const SUBPROTOCOL = "openagents.v2";
/** The subprotocol prefix that carries the token where headers cannot (browsers). */
export const BEARER_PROTOCOL_PREFIX = "openagents.bearer.";

/** What each close code a runtime uses means. */
const CLOSE_CODES: { readonly [code: number]: string } = {
  1000: "normal closure",
  1001: "going away: the runtime is shutting down",
  1002: "protocol error",
  1003: "unsupported data: only JSON text frames are accepted",
  1006: "abnormal closure: the connection dropped without a close frame",
  1008: "policy: idle for too long",
  1009: "message too big: larger than SERVER_MAX_LINE_BYTES",
  1011: "the runtime hit an internal error",
  1013: "try again later: this client did not keep up with its messages; reconnect and subscribe with `since`",
};

/** The part of a WHATWG `WebSocket` the transport uses (browsers, Deno, Node.js 22+, and `ws`). */
export interface WebSocketLike {
  readonly readyState: number;
  readonly protocol: string;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open", listener: () => void): void;
  addEventListener(type: "message", listener: (event: { readonly data: unknown }) => void): void;
  addEventListener(type: "close", listener: (event: { readonly code: number; readonly reason: string }) => void): void;
  addEventListener(type: "error", listener: (event: unknown) => void): void;
}

/** A WHATWG `WebSocket` constructor. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** What an opener tells the transport about the handshake, where it can read it. */
export interface HandshakeObserver {
  /** The handshake's response headers (`get` looks a header up by lower-case name), before `open` or `close`. */
  headers(get: (name: string) => string | undefined): void;
  /** The runtime refused the upgrade with this HTTP status and body, before `close`. */
  refused(status: number, body: string): void;
}

/** Opens sockets some other way than a WHATWG constructor (`@openagents/client/node` uses `ws`). */
export interface SocketOpener {
  /** Opens a socket to `url` asking for `protocols`; authenticates as it sees fit, and reports the handshake to `handshake`. */
  open(url: string, protocols: string[], handshake: HandshakeObserver): WebSocketLike;
}

/** What an approval handler decides: approve or deny, optionally with a free-form answer. */
export type ApprovalDecision = boolean | ApprovalReply;

/** Context for one approval request. */
export interface ApprovalContext {
  /** Aborts when the answer is no longer wanted: another frontend answered, it timed out, or the socket closed. */
  readonly signal: AbortSignal;
}

/**
 * Answers the agent's approval requests (`frontend.v2.approval`), sync or async. When it throws,
 * rejects, or returns something that is not a decision, the answer is a denial.
 */
export type ApprovalHandler = (request: ApprovalPrompt, context: ApprovalContext) => ApprovalDecision | Promise<ApprovalDecision>;

/** Options for `WebSocketTransport`. */
export interface WebSocketTransportOptions {
  /**
   * The runtime: its base URL as `openagents serve --http` prints it (`http://127.0.0.1:PORT/`,
   * turned into `ws://127.0.0.1:PORT/frontend/v2`), or the `ws:`/`wss:` URL of `/frontend/v2`.
   */
  readonly url: string | URL;
  /** The bearer token. */
  readonly token: string;
  /** The `WebSocket` constructor (default: `globalThis.WebSocket`). */
  readonly WebSocket?: WebSocketConstructor;
  /** Opens the socket instead of `WebSocket` (see `connectWebSocket` in `@openagents/client/node`). */
  readonly opener?: SocketOpener;
  /**
   * Answers the agent's approval requests. Without one, every approval request sent to this
   * client is denied at once (the runtime sends them only to credentials allowed to answer; use
   * a credential without the approvals grant for a client that only watches).
   */
  readonly onApproval?: ApprovalHandler;
}

/** The WebSocket closed, or never opened: `closeCode` and `reason` say why. */
export class WebSocketClosedError extends TransportError {
  /** The close code (1006 when the connection dropped or the handshake failed). */
  readonly closeCode: number;
  /** The close reason the runtime gave, if any. */
  readonly reason: string;
  constructor(message: string, closeCode: number, reason: string) {
    super(message);
    this.name = "WebSocketClosedError";
    this.closeCode = closeCode;
    this.reason = reason;
  }
}

/** The `ws:` URL of `/frontend/v2` for a base URL or a WebSocket URL. */
export function frontendUrl(url: string | URL): URL {
  const u = new URL(url);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  else if (u.protocol !== "ws:" && u.protocol !== "wss:") throw new TypeError(`not an http(s) or ws(s) URL: ${u.href}`);
  if (!u.pathname.replace(/\/+$/, "").endsWith("/frontend/v2")) {
    if (!u.pathname.endsWith("/")) u.pathname += "/";
    u.pathname += FRONTEND_PATH;
  }
  u.search = "";
  u.hash = "";
  return u;
}

/** JSON-RPC over one WebSocket to `/frontend/v2`. It connects at once; it does not reconnect. */
export class WebSocketTransport implements Transport {
  /** The `/frontend/v2` URL. */
  readonly where: string;
  /** Whether the handshake's headers are read (with an opener, as in Node.js); browsers cannot. */
  readonly reportsIdentity: boolean;
  private readonly socket: WebSocketLike;
  private readonly opened: Promise<void>;
  private readonly onApproval: ApprovalHandler | undefined;
  private readonly pending = new PendingReplies();
  private readonly subscribers = new Set<LocalSubscription>();
  private readonly approvals = new Map<string, AbortController>();
  private readonly identityListeners: ((identity: RuntimeIdentity) => void)[] = [];
  private identity: RuntimeIdentity | null = null;
  private refusal: { status: number; body: string } | null = null;
  private failure: Error | null = null;
  private closedByUs = false;
  /** The latest `subscribe` of this connection: resolves with null once the stream is on, or why it is not. */
  private stream: Promise<Error | null> | null = null;
  /** The newest sequence number the connection's stream has delivered. */
  private newestSeq = 0;
  /**
   * Resolves once the socket has closed (or failed to open), with the error every later call
   * fails with: a `WebSocketClosedError` with the close code and reason, or the runtime's refusal.
   * The transport does not reconnect; a new client can resume events with `since`.
   */
  readonly closed: Promise<Error>;

  constructor(options: WebSocketTransportOptions) {
    const url = frontendUrl(options.url);
    this.where = url.href;
    this.onApproval = options.onApproval;
    this.reportsIdentity = options.opener !== undefined;
    const observer: HandshakeObserver = {
      headers: (get) => this.stateIdentity(identityFromHeaders(get, "the WebSocket handshake")),
      refused: (status, body) => {
        this.refusal = { status, body };
      },
    };
    if (options.opener) {
      this.socket = options.opener.open(url.href, [SUBPROTOCOL], observer);
    } else {
      const Ctor = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
      if (!Ctor) {
        throw new TypeError("there is no global WebSocket here: pass the `WebSocket` option, or in Node.js use `connectWebSocket` from `@openagents/client/node`");
      }
      this.socket = new Ctor(url.href, [SUBPROTOCOL, BEARER_PROTOCOL_PREFIX + options.token]);
    }
    let markOpen!: () => void;
    let markClosed!: (e: Error) => void;
    this.opened = new Promise<void>((resolve) => (markOpen = resolve));
    this.closed = new Promise<Error>((resolve) => (markClosed = resolve));
    let open = false;
    this.socket.addEventListener("open", () => {
      open = true;
      markOpen();
    });
    this.socket.addEventListener("message", (event) => this.receive(event.data));
    this.socket.addEventListener("error", () => undefined);
    this.socket.addEventListener("close", (event) => {
      const error = this.closeError(open, event.code, event.reason);
      this.fail(error);
      markOpen();
      markClosed(this.failure ?? error);
    });
  }

  /** Resolves once the socket is open; rejects with the reason it could not open. */
  async ready(): Promise<void> {
    await this.opened;
    if (this.failure) throw this.failure;
  }

  watchIdentity(listener: (identity: RuntimeIdentity) => void): void {
    this.identityListeners.push(listener);
    if (this.identity) listener(this.identity);
  }

  private stateIdentity(identity: RuntimeIdentity): void {
    this.identity = identity;
    for (const l of this.identityListeners) l(identity);
  }

  private closeError(open: boolean, code: number, reason: string): Error {
    if (!open) {
      const refusal = this.refusal;
      if (refusal) {
        let envelope: unknown;
        try {
          envelope = JSON.parse(refusal.body) as unknown;
        } catch {
          envelope = undefined;
        }
        return new RefusedByRuntime(`the WebSocket handshake with ${this.where} was refused: HTTP ${refusal.status}: ${refusal.body.slice(0, 200)}`, envelope, refusal.status);
      }
      if (this.closedByUs) return new WebSocketClosedError(`the WebSocket to ${this.where} was closed by this client before it opened`, code, reason);
      return new WebSocketClosedError(
        `cannot open the WebSocket to ${this.where} (close code ${code}): the runtime is unreachable, or refused the handshake (a wrong token?); a browser does not say which`,
        code,
        reason,
      );
    }
    const meaning = CLOSE_CODES[code] ?? "unknown close code";
    const by = this.closedByUs ? "this client closed" : "closed";
    return new WebSocketClosedError(`the WebSocket to ${this.where} ${by} (code ${code}, ${meaning})${reason ? `: ${reason}` : ""}`, code, reason);
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.pending.rejectAll(err);
    for (const s of this.subscribers) s.end(this.closedByUs ? undefined : err);
    for (const c of this.approvals.values()) c.abort(err);
  }

  private sendMessage(message: unknown): boolean {
    if (this.failure || this.socket.readyState !== 1) return false;
    this.socket.send(JSON.stringify(message));
    return true;
  }

  private receive(data: unknown): void {
    if (typeof data !== "string") return; // The runtime sends only text frames.
    let msg: unknown;
    try {
      msg = JSON.parse(data) as unknown;
    } catch {
      return;
    }
    if (!isObject(msg)) return;
    const method = msg.method;
    if (typeof method === "string") {
      if ("id" in msg && msg.id !== undefined && msg.id !== null) {
        if (method === "frontend.v2.approval") void this.answerApproval(msg);
        else this.sendMessage({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `this client does not handle \`${method}\`` } });
        return;
      }
      if (method === "frontend.v2.event") {
        const ev = msg.params;
        if (isObject(ev) && typeof ev.seq === "number" && isObject(ev.event) && ev.event.type !== "lagged" && ev.event.type !== "gap") {
          this.newestSeq = Math.max(this.newestSeq, ev.seq);
        }
        for (const s of this.subscribers) s.push(ev);
      } else if (method === "frontend.v2.approval_resolved" && isObject(msg.params) && typeof msg.params.request_id === "string") {
        this.approvals.get(msg.params.request_id)?.abort(new Error("the approval request was settled"));
      }
      return; // A notification this version does not know.
    }
    this.pending.take(msg.id)?.resolve(msg);
  }

  /** Answers one `frontend.v2.approval` request: the handler's decision, else a denial. */
  private async answerApproval(msg: { [key: string]: unknown }): Promise<void> {
    const id = msg.id;
    let reply: ApprovalReply = { approved: false };
    const handler = this.onApproval;
    if (handler && validateFrontendApprovalRequest(msg, true).length === 0) {
      const request = msg.params as ApprovalPrompt;
      const control = new AbortController();
      this.approvals.set(request.request_id, control);
      const timer = request.timeout_ms !== undefined ? setTimeout(() => control.abort(new Error("the approval request timed out")), request.timeout_ms) : undefined;
      try {
        const decision = await handler(request, { signal: control.signal });
        if (typeof decision === "boolean") reply = { approved: decision };
        else if (validateApprovalReply(decision).length === 0) reply = decision;
      } catch {
        // Fail closed: a handler that fails denies.
      } finally {
        if (timer !== undefined) clearTimeout(timer);
        this.approvals.delete(request.request_id);
      }
      // Settled elsewhere: the runtime ignores a late answer, so send none.
      if (control.signal.aborted) return;
    }
    this.sendMessage({ jsonrpc: "2.0", id, result: reply });
  }

  async request(method: string, params: unknown, options: RequestOptions = {}): Promise<unknown> {
    const signal = options.signal;
    signal?.throwIfAborted();
    await this.opened;
    if (this.failure) throw this.failure;
    signal?.throwIfAborted();
    const id = this.pending.newId();
    const text = JSON.stringify(params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params });
    if (new TextEncoder().encode(text).byteLength > SERVER_MAX_LINE_BYTES) {
      throw new TransportError(`the request is larger than SERVER_MAX_LINE_BYTES (${SERVER_MAX_LINE_BYTES} bytes)`);
    }
    return this.pending.wait(id, {}, signal, () => this.socket.send(text));
  }

  /**
   * Subscribes to the connection's event stream. The runtime keeps one stream per connection: the
   * first subscription (or one with `since`) sends `subscribe`, restarting the stream early enough
   * for every local subscriber; each takes only what it has not seen.
   */
  subscribe(options: SubscribeOptions = {}): EventSubscription {
    const sub = new LocalSubscription(() => this.subscribers.delete(sub), options.since);
    if (this.failure) {
      sub.end(this.failure);
      return sub;
    }
    const others = [...this.subscribers];
    this.subscribers.add(sub);
    options.signal?.addEventListener("abort", () => sub.close(), { once: true });
    if (options.since === undefined && this.stream !== null) {
      // The stream is on (or being started): this subscriber takes every event from now.
      sub.skipThrough(this.newestSeq);
      void this.stream.then((refused) => this.settle(sub, refused));
      return sub;
    }
    let since = options.since;
    if (since !== undefined) for (const o of others) since = Math.min(since, o.position);
    const started = this.request("subscribe", since === undefined ? undefined : { since }).then(
      (r): Error | null => {
        // The reader gets the typed refusal (for example `forbidden` for a grant without events).
        if (isObject(r) && r.error !== undefined) return new RefusedByRuntime(`subscribe was refused: ${JSON.stringify(r.error)}`, r);
        if (options.since === undefined && isObject(r) && isObject(r.result) && typeof r.result.last_seq === "number") sub.skipThrough(r.result.last_seq);
        return null;
      },
      (e: unknown): Error => (e instanceof Error ? e : new TransportError(String(e))),
    );
    this.stream = started;
    void started.then((refused) => {
      // A refused `subscribe` leaves no stream on: the next subscription asks again.
      if (refused && this.stream === started) this.stream = null;
      this.settle(sub, refused);
    });
    return sub;
  }

  /** Marks a subscription ready, or ends it with why the stream could not start. */
  private settle(sub: LocalSubscription, refused: Error | null): void {
    if (refused === null) {
      sub.markReady();
      return;
    }
    this.subscribers.delete(sub);
    sub.end(refused);
  }

  /** Closes the socket (code 1000) and ends every subscription. */
  async close(): Promise<void> {
    this.closedByUs = true;
    if (this.socket.readyState === 0 || this.socket.readyState === 1) this.socket.close(1000, "the client closed");
    await this.closed;
  }
}
