/**
 * What a client needs from a transport: send one request and get its response, and subscribe
 * to the runtime's events. Transports never know method semantics; they move JSON and say when
 * the exchange itself failed (`TransportError`). Typing, validation and error classes are the
 * client's.
 *
 * Implemented by `HttpTransport` (`POST /rpc` + SSE `GET /events`), `WebSocketTransport`
 * (`/frontend/v2`: requests and responses as text frames, events as `frontend.v2.event`
 * notifications after `subscribe`, approval requests answered by a handler) and, in Node.js,
 * `StdioTransport` (a child `openagents serve --stdio`).
 */

/** Options for one request. */
export interface RequestOptions {
  /** Stops waiting for the response when it aborts (the request may still have reached the runtime). */
  readonly signal?: AbortSignal | undefined;
}

/** Options for an event subscription. */
export interface SubscribeOptions {
  /** Deliver every event after this sequence number (replayed while the runtime still holds them). Without it, only new events. */
  readonly since?: number | undefined;
  /** Ends the subscription when it aborts. */
  readonly signal?: AbortSignal | undefined;
}

/** A live event subscription: iterate it for the events, as the runtime sent them (untyped). */
export interface EventSubscription extends AsyncIterable<unknown> {
  /** Resolves once the runtime has registered the subscription: no event published after that is missed. */
  readonly ready: Promise<void>;
  /** Ends the subscription; a pending iteration finishes. */
  close(): void;
}

/** One way of reaching a runtime. */
export interface Transport {
  /**
   * Sends `{"jsonrpc": "2.0", "id", "method", "params"}` (no `params` member when `params` is undefined) and
   * resolves with the parsed response envelope, whatever it says (`result` or `error`).
   *
   * @throws TransportError when no response could be read.
   */
  request(method: string, params: unknown, options?: RequestOptions): Promise<unknown>;
  /** Subscribes to the runtime's events (each a `ServerEvent`, before validation). */
  subscribe(options?: SubscribeOptions): EventSubscription;
  /** Releases the transport's resources (connections, the child process). */
  close(): Promise<void>;
  /** Where it connects, for messages: a URL, or the command it runs. */
  readonly where?: string;
  /**
   * Whether the transport tells `watchIdentity` listeners what the runtime states about itself
   * before it answers its first exchange (HTTP response headers; the WebSocket handshake, where
   * it can be read). When it does not, the client asks `status` once to check the schema.
   */
  readonly reportsIdentity?: boolean;
  /** Registers a listener for the identity the runtime states on each exchange. */
  watchIdentity?(listener: (identity: RuntimeIdentity) => void): void;
}

/**
 * What a runtime states about itself outside any result: the `openagents-schema-digest` and
 * `openagents-protocol-version` headers of every HTTP response and of the WebSocket handshake.
 */
export interface RuntimeIdentity {
  /** The digest of the schema the runtime was built from, when it said. */
  readonly schemaDigest: string | undefined;
  /** The protocol version the runtime speaks, when it said. */
  readonly protocolVersion: string | undefined;
  /** Which exchange said it (for messages): `HTTP response headers`, `the WebSocket handshake`. */
  readonly via: string;
}

/** The header with the runtime's schema digest. */
export const SCHEMA_DIGEST_HEADER = "openagents-schema-digest";
/** The header with the runtime's protocol version. */
export const PROTOCOL_VERSION_HEADER = "openagents-protocol-version";

/** Reads a runtime's identity from response headers (`get` looks a header up by lower-case name). */
export function identityFromHeaders(get: (name: string) => string | null | undefined, via: string): RuntimeIdentity {
  return { schemaDigest: get(SCHEMA_DIGEST_HEADER) ?? undefined, protocolVersion: get(PROTOCOL_VERSION_HEADER) ?? undefined, via };
}

/**
 * The runtime refused the exchange with an error response outside a request (for example
 * `GET /events` with a bad token). `envelope` is the parsed body, when it was JSON; the client
 * turns it into the typed error.
 */
export class RefusedByRuntime extends Error {
  /** The HTTP status, when there is one. */
  readonly status: number | undefined;
  /** The response envelope, as parsed. */
  readonly envelope: unknown;
  constructor(message: string, envelope: unknown, status?: number) {
    super(message);
    this.name = "RefusedByRuntime";
    this.envelope = envelope;
    this.status = status;
  }
}

/** A request waiting for its reply. */
export interface ReplyWaiter {
  resolve(reply: unknown): void;
  reject(error: unknown): void;
}

/**
 * The requests of one connection that await their replies, by id (stdio, WebSocket: replies
 * arrive on a shared stream, matched by id). Browser-safe.
 */
export class PendingReplies<Extra extends object = Record<never, never>> {
  private nextId = 1;
  private readonly waiting = new Map<number, Extra & ReplyWaiter>();

  /** The id for the next request. */
  newId(): number {
    return this.nextId++;
  }

  /**
   * Registers request `id` (with `extra` kept beside it), runs `send`, and settles with the reply,
   * or with `signal`'s reason when it aborts first (the request is forgotten then).
   */
  wait(id: number, extra: Extra, signal: AbortSignal | undefined, send: () => void): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = (): void => {
        this.waiting.delete(id);
        reject(signal?.reason);
      };
      this.waiting.set(id, {
        ...extra,
        resolve: (v: unknown) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(v);
        },
        reject: (e: unknown) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      send();
    });
  }

  /** Removes and returns the request a reply with `id` answers; undefined when none waits for it. */
  take(id: unknown): (Extra & ReplyWaiter) | undefined {
    if (typeof id !== "number") return undefined;
    const w = this.waiting.get(id);
    this.waiting.delete(id);
    return w;
  }

  /** Fails every waiting request with `error`. */
  rejectAll(error: unknown): void {
    const all = [...this.waiting.values()];
    this.waiting.clear();
    for (const w of all) w.reject(error);
  }
}
