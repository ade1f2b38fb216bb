/**
 * What a client needs from a transport: send one request and get its response, and subscribe
 * to the runtime's events. Transports never know method semantics; they move JSON and say when
 * the exchange itself failed (`TransportError`). Typing, validation and error classes are the
 * client's.
 *
 * Implemented by `HttpTransport` (`POST /rpc` + SSE `GET /events`) and, in Node.js,
 * `StdioTransport` (a child `openagents serve --stdio`). A WebSocket transport for
 * `/frontend/v2` fits the same shape: `request` sends a text frame and awaits the response with
 * the same `id`; `subscribe` sends the `subscribe` method and yields the `params` of each
 * `frontend.v2.event` notification; server-to-client approval requests would go to an approval
 * handler given to that transport. It is not part of this package yet.
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
   * Sends `{"id", "method", "params"}` (no `params` member when `params` is undefined) and
   * resolves with the parsed response envelope, whatever it says (`result` or `error`).
   *
   * @throws TransportError when no response could be read.
   */
  request(method: string, params: unknown, options?: RequestOptions): Promise<unknown>;
  /** Subscribes to the runtime's events (each a `ServerEvent`, before validation). */
  subscribe(options?: SubscribeOptions): EventSubscription;
  /** Releases the transport's resources (connections, the child process). */
  close(): Promise<void>;
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
