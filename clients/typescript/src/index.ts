/**
 * `@openagents/client`: typed access to an openagents runtime, generated from the protocol's
 * JSON Schema. This entry point runs anywhere `fetch` and `WebSocket` do (browsers included);
 * the stdio transport, the `ws`-based WebSocket opener and the runner helper are Node.js only,
 * under `@openagents/client/node` and `@openagents/client/runner`.
 *
 * ```ts
 * import { OpenAgentsClient } from "@openagents/client";
 * const client = OpenAgentsClient.http({ url, token });
 * const status = await client.status();
 * const live = OpenAgentsClient.websocket({ url, token, onApproval: ({ prompt }) => confirm(prompt) });
 * ```
 */

export * from "./generated/index.js";
export { assertNever, codePoints } from "./rt.js";
export type { Violation as ValidationViolation } from "./rt.js";
export { OpenAgentsError, ProtocolError, TransportError, UnknownCodeError } from "./error.js";
export { OpenAgentsClient, toTypedError } from "./client.js";
export type { ClientOptions, EventStream, RunTurnOptions } from "./client.js";
export { HttpTransport } from "./http.js";
export { RpcError, rpcCall } from "./rpc.js";
export type { HttpTransportOptions } from "./http.js";
export { WebSocketClosedError, WebSocketTransport, frontendUrl } from "./websocket.js";
export type {
  ApprovalContext,
  ApprovalDecision,
  ApprovalHandler,
  HandshakeObserver,
  SocketOpener,
  WebSocketConstructor,
  WebSocketLike,
  WebSocketTransportOptions,
} from "./websocket.js";
export { SchemaMismatchError } from "./schema.js";
export type { SchemaMismatch } from "./schema.js";
export { PROTOCOL_VERSION_HEADER, RefusedByRuntime, SCHEMA_DIGEST_HEADER } from "./transport.js";
export type { EventSubscription, RequestOptions, RuntimeIdentity, SubscribeOptions, Transport } from "./transport.js";
export { SseParser } from "./sse.js";
export type { SseMessage } from "./sse.js";
