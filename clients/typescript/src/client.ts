/**
 * The typed client: one method per schema method (generated), over any `Transport`. Params are
 * checked by the generated validators before they are sent; responses and events are checked
 * leniently (unknown kinds and values of `x-extensible` unions and enums are kept, not refused);
 * a runtime's failure is thrown as the class generated for its code.
 */

import { OpenAgentsError, ProtocolError, TransportError } from "./error.js";
import { errorClass, InvalidParamsError } from "./generated/errors.js";
import { GeneratedMethods } from "./generated/methods.js";
import type { CallOptions } from "./generated/methods.js";
import type { MethodName, MethodParams, MethodResult, RpcError, ServerEvent, SubmitParams, SubmitResult } from "./generated/types.js";
import { isKnownRuntimeEvent, SCHEMA_DIGEST } from "./generated/types.js";
import { METHOD_CHECKS, validateRpcError, validateRpcResponse, validateServerEvent } from "./generated/validators.js";
import { HttpTransport } from "./http.js";
import type { HttpTransportOptions } from "./http.js";
import { isObject } from "./rt.js";
import { SchemaMismatchError, schemaMismatch, warnSchemaMismatch } from "./schema.js";
import type { SchemaMismatch } from "./schema.js";
import { RefusedByRuntime } from "./transport.js";
import type { EventSubscription, SubscribeOptions, Transport } from "./transport.js";
import { WebSocketTransport } from "./websocket.js";
import type { WebSocketTransportOptions } from "./websocket.js";

export type { CallOptions };

/** Client options. */
export interface ClientOptions {
  /** Check params with the generated validators before sending them (default true). */
  readonly validateParams?: boolean;
  /** Check responses and events (leniently) and throw `ProtocolError` on a malformed one (default true). */
  readonly validateResponses?: boolean;
  /**
   * When the runtime runs another schema than this client was generated from (`SCHEMA_DIGEST`),
   * fail every call with `SchemaMismatchError` instead of warning (default false).
   */
  readonly strictSchema?: boolean;
  /**
   * Called once per client when the runtime's schema differs from this client's, instead of the
   * default warning (`process.emitWarning` as a `SchemaMismatchWarning` in Node.js, else
   * `console.warn`). In strict mode it is called too, before calls fail.
   */
  readonly onSchemaMismatch?: (mismatch: SchemaMismatch) => void;
}

/** A typed event stream. */
export interface EventStream extends AsyncIterable<ServerEvent> {
  /** Resolves once the runtime has registered the subscription (rejects with the typed error if it refused). */
  readonly ready: Promise<void>;
  /** Ends the stream. */
  close(): void;
}

/** Options for `runTurn`. */
export interface RunTurnOptions {
  /** Aborting interrupts the turn (see `submit`). */
  readonly signal?: AbortSignal;
  /** Called with each event of this turn, from `turn_started` to `turn_completed` or `turn_failed`. */
  readonly onEvent?: (event: ServerEvent) => void;
}

/** How long `runTurn` waits, after the answer, for the turn's last event to arrive on the stream. */
const TRAILING_EVENTS_MS = 2000;

/** A client of one runtime. */
export class OpenAgentsClient extends GeneratedMethods {
  /** The transport it talks through. */
  readonly transport: Transport;
  private readonly checkParams: boolean;
  private readonly checkResponses: boolean;
  private readonly strictSchema: boolean;
  private readonly onSchemaMismatch: ((mismatch: SchemaMismatch) => void) | undefined;
  /** The runtime's schema differs from this client's (found once, reported once). */
  private schemaMismatch: SchemaMismatchError | null = null;
  /** The `status` sent once to check the schema, on transports that cannot tell it otherwise. */
  private schemaProbe: Promise<void> | null = null;

  constructor(transport: Transport, options: ClientOptions = {}) {
    super();
    this.transport = transport;
    this.checkParams = options.validateParams ?? true;
    this.checkResponses = options.validateResponses ?? true;
    this.strictSchema = options.strictSchema ?? false;
    this.onSchemaMismatch = options.onSchemaMismatch;
    transport.watchIdentity?.((identity) => this.compareSchema(identity.schemaDigest, identity.protocolVersion, identity.via));
  }

  /** A client over HTTP (`POST /rpc`, SSE `GET /events`). */
  static http(options: HttpTransportOptions & ClientOptions): OpenAgentsClient {
    return new OpenAgentsClient(new HttpTransport(options), options);
  }

  /**
   * A client over the WebSocket `/frontend/v2`, with the global `WebSocket` (browsers) or the
   * one given; in Node.js use `connectWebSocket` from `@openagents/client/node`.
   */
  static websocket(options: WebSocketTransportOptions & ClientOptions): OpenAgentsClient {
    return new OpenAgentsClient(new WebSocketTransport(options), options);
  }

  /** The schema mismatch found so far, if any (see `strictSchema`, `onSchemaMismatch`). */
  get schemaMismatchFound(): SchemaMismatch | undefined {
    return this.schemaMismatch?.mismatch;
  }

  /** Compares a digest the runtime stated with this client's; reports the first mismatch. */
  private compareSchema(digest: unknown, protocolVersion: unknown, via: string): void {
    if (typeof digest !== "string" || digest === SCHEMA_DIGEST || this.schemaMismatch) return;
    const mismatch = schemaMismatch(digest, typeof protocolVersion === "string" ? protocolVersion : undefined, this.transport.where ?? "(an unnamed transport)", via);
    this.schemaMismatch = new SchemaMismatchError(mismatch);
    if (this.onSchemaMismatch) {
      try {
        this.onSchemaMismatch(mismatch);
      } catch {
        // A failing callback must not break the call that found the mismatch.
      }
    } else if (!this.strictSchema) {
      warnSchemaMismatch(mismatch);
    }
  }

  /** In strict mode, fails once the runtime is known to run another schema. */
  private assertSchema(): void {
    if (this.strictSchema && this.schemaMismatch) throw this.schemaMismatch;
  }

  /**
   * On a transport that cannot say the runtime's schema before its first answer (stdio, a
   * browser's WebSocket), asks `status` once. A failed probe checks nothing; every later
   * `status` result is still checked.
   */
  private checkSchemaFirst(): Promise<void> {
    if (this.transport.reportsIdentity) return Promise.resolve();
    this.schemaProbe ??= this.transport.request("status", undefined).then(
      (raw) => {
        if (isObject(raw) && isObject(raw.result)) this.compareSchema(raw.result.schema_digest, raw.result.protocol_version, "the `status` result");
      },
      () => undefined,
    );
    return this.schemaProbe;
  }

  /**
   * Sends one request and answers with its typed result.
   *
   * `submit` with a `signal`: aborting sends `interrupt` (repeated until the runtime reports the
   * turn stopped, or the submit is answered), and the promise then settles with the runtime's
   * answer to the submit — usually an `InterruptedError`, or the result if the turn had already
   * completed.
   */
  protected async call<M extends MethodName>(method: M, params: MethodParams<M>, options: CallOptions = {}): Promise<MethodResult<M>> {
    const check = METHOD_CHECKS[method];
    if (this.checkParams) {
      const violations = check.checkParams(params);
      if (violations.length > 0) {
        throw new InvalidParamsError(
          {
            code: "invalid_params",
            message: `invalid \`${method}\` params (checked before sending): ${violations.map((v) => `${v.pointer || "(root)"}: ${v.message}`).join("; ")}`,
            retryable: false,
            details: { violations },
          },
          -32602,
        );
      }
    }
    if (method === "submit") options.signal?.throwIfAborted();
    // A `status` checks the schema with its own result.
    if (method !== "status") await this.checkSchemaFirst();
    this.assertSchema();
    let raw: unknown;
    try {
      raw = method === "submit" && options.signal ? await this.submitInterruptible(params, options.signal) : await this.transport.request(method, params, { signal: options.signal });
    } catch (e) {
      throw mapError(e);
    }
    // The exchange's own headers may have told of a mismatch.
    this.assertSchema();
    return this.read(method, raw);
  }

  /**
   * Sends `submit`; aborting `signal` interrupts the turn. Resolves with the raw response. The
   * turn is named (an assignment is generated when `params` has none) and every `interrupt`
   * names it, so a late one can never stop a later turn, or another client's.
   */
  private async submitInterruptible(params: unknown, signal: AbortSignal): Promise<unknown> {
    signal.throwIfAborted();
    const given = isObject(params) ? params.assignment : undefined;
    const assignment = typeof given === "string" ? given : `asg-${randomHex(16)}`;
    const named = { ...(isObject(params) ? params : {}), assignment };
    let settled = false;
    const onAbort = (): void => {
      void this.interruptUntilStopped(assignment, () => settled);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      return await this.transport.request("submit", named);
    } finally {
      settled = true;
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** Sends `interrupt` for `assignment` until the runtime says it stopped it (the submit may not have started it yet). */
  private async interruptUntilStopped(assignment: string, settled: () => boolean): Promise<void> {
    for (let attempt = 0; attempt < 100 && !settled(); attempt++) {
      try {
        if ((await this.interrupt({ assignment })).interrupted) return;
      } catch {
        // A transport hiccup: try again while the submit is pending.
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Reads a response envelope: the typed result, or the typed error thrown. */
  private read<M extends MethodName>(method: M, raw: unknown): MethodResult<M> {
    if (this.checkResponses) {
      const violations = validateRpcResponse(raw, true);
      if (violations.length > 0) throw new ProtocolError(`the \`${method}\` response is not a valid RpcResponse`, violations);
    } else if (!isObject(raw)) {
      throw new ProtocolError(`the \`${method}\` response is not an object`);
    }
    const envelope = raw as { result?: unknown; error?: RpcError };
    if (envelope.error !== undefined) throw toTypedError(envelope.error);
    if (!("result" in envelope)) throw new ProtocolError(`the \`${method}\` response has neither \`result\` nor \`error\``);
    if (this.checkResponses) {
      const violations = METHOD_CHECKS[method].checkResult(envelope.result, true);
      if (violations.length > 0) throw new ProtocolError(`the \`${method}\` result is not valid`, violations);
    }
    if (method === "status" && isObject(envelope.result)) {
      this.compareSchema(envelope.result.schema_digest, envelope.result.protocol_version, "the `status` result");
      this.assertSchema();
    }
    return envelope.result as MethodResult<M>;
  }

  /**
   * The runtime's events, each a `ServerEvent`. Kinds this version does not know arrive as the
   * union's unknown member (see `isKnownRuntimeEvent`). Over HTTP a dropped stream is resumed
   * with `Last-Event-ID`.
   */
  events(options: SubscribeOptions = {}): EventStream {
    // The schema probe goes out before the subscription: on a connection that keeps its order,
    // its answer would otherwise come after the whole replay, which would wait (and could
    // overflow the subscription's queue) while the stream is not yet read.
    void this.checkSchemaFirst();
    const sub: EventSubscription = this.transport.subscribe(options);
    const check = this.checkResponses;
    const ready = sub.ready.then(
      () => this.assertSchema(),
      (e: unknown) => {
        throw mapError(e);
      },
    );
    ready.catch(() => undefined);
    const client = this;
    return {
      ready,
      close: () => sub.close(),
      async *[Symbol.asyncIterator](): AsyncIterator<ServerEvent> {
        try {
          await client.checkSchemaFirst();
          for await (const raw of sub) {
            client.assertSchema();
            if (check) {
              const violations = validateServerEvent(raw, true);
              if (violations.length > 0) throw new ProtocolError("an event is not a valid ServerEvent", violations);
            }
            yield raw as ServerEvent;
          }
        } catch (e) {
          throw mapError(e);
        } finally {
          sub.close();
        }
      },
    };
  }

  /**
   * Runs one turn: subscribes to events, submits, passes each event of this turn to `onEvent`,
   * and answers with the result (or throws the typed error). Without an `assignment`, one is
   * generated so the turn's events can be told apart.
   */
  async runTurn(params: SubmitParams, options: RunTurnOptions = {}): Promise<SubmitResult> {
    const assignment = params.assignment ?? `asg-${randomHex(16)}`;
    const stream = this.events();
    await stream.ready;
    const watch = (async (): Promise<void> => {
      let ours = false;
      for await (const ev of stream) {
        const e = ev.event;
        if (!isKnownRuntimeEvent(e)) {
          if (ours) options.onEvent?.(ev);
          continue;
        }
        if (e.type === "turn_started") ours = e.assignment === assignment;
        if (ours) options.onEvent?.(ev);
        if ((ours && (e.type === "turn_completed" || e.type === "turn_failed")) || e.type === "shutting_down") return;
      }
    })();
    watch.catch(() => undefined);
    const trailing = (): Promise<unknown> =>
      Promise.race([watch.catch(() => undefined), new Promise((r) => (setTimeout(r, TRAILING_EVENTS_MS) as { unref?: () => void }).unref?.())]);
    try {
      const result = await this.submit({ ...params, assignment }, options.signal ? { signal: options.signal } : {});
      await trailing();
      return result;
    } catch (e) {
      await trailing();
      throw e;
    } finally {
      stream.close();
    }
  }

  /** Closes the transport. */
  close(): Promise<void> {
    return this.transport.close();
  }
}

/**
 * `bytes` random bytes as lowercase hex, from `crypto.getRandomValues`: available on every page,
 * unlike `crypto.randomUUID`, which browsers offer only in secure contexts (HTTPS or loopback).
 */
export function randomHex(bytes: number): string {
  const buf = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(buf);
  let out = "";
  for (const b of buf) out += b.toString(16).padStart(2, "0");
  return out;
}

/** The typed error for a JSON-RPC error object whose `data` is a `RuntimeSubmitError`. */
export function toTypedError(error: RpcError): OpenAgentsError {
  const Class = errorClass(error.data.code);
  return new Class(error.data, error.code);
}

/** Errors from a transport, as the client throws them. */
function mapError(e: unknown): unknown {
  if (e instanceof RefusedByRuntime) {
    const env = e.envelope;
    if (isObject(env) && env.error !== undefined && validateRpcError(env.error, true).length === 0) return toTypedError(env.error as RpcError);
    return new TransportError(e.message, { cause: e });
  }
  return e;
}
