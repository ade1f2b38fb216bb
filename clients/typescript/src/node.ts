/**
 * The Node.js entry point: everything in `@openagents/client`, plus the stdio transport, which
 * runs `openagents serve --stdio` as a child process, and `connectWebSocket`, which opens
 * `/frontend/v2` with `ws` (sending `Authorization: Bearer`, and reading the handshake's
 * headers for the schema check).
 *
 * ```ts
 * import { connectStdio, connectWebSocket } from "@openagents/client/node";
 * const client = connectStdio({ runner: "echo" });
 * const { result } = await client.submit({ task: "hello" });
 * await client.close();
 * const ws = connectWebSocket({ url, token, onApproval: ({ prompt }) => prompt.startsWith("May I read") });
 * ```
 */

import type { IncomingMessage } from "node:http";

import WebSocket from "ws";

import { OpenAgentsClient } from "./client.js";
import type { ClientOptions } from "./client.js";
import { SERVER_MAX_LINE_BYTES } from "./generated/types.js";
import { StdioTransport } from "./stdio.js";
import type { StdioTransportOptions } from "./stdio.js";
import { WebSocketTransport } from "./websocket.js";
import type { SocketOpener, WebSocketTransportOptions } from "./websocket.js";

export * from "./index.js";
export { StdioTransport } from "./stdio.js";
export type { StdioTransportOptions } from "./stdio.js";
export { LineReader, LineTooLongError } from "./lines.js";

/** A client of a runtime started as a child process (`openagents serve --stdio --runner ID`). */
export function connectStdio(options: StdioTransportOptions & ClientOptions): OpenAgentsClient {
  return new OpenAgentsClient(StdioTransport.spawn(options), options);
}

/** The most of a refused handshake's body kept for the error. */
const REFUSAL_BODY_BYTES = 64 * 1024;

/**
 * Opens sockets with `ws`: the token goes in `Authorization: Bearer` (never in a subprotocol),
 * incoming messages are bounded by `SERVER_MAX_LINE_BYTES`, and the handshake's headers (the
 * runtime's schema digest) and a refusal's status and body are reported to the transport.
 */
export function nodeWebSocketOpener(token: string): SocketOpener {
  return {
    open(url, protocols, handshake) {
      const socket = new WebSocket(url, protocols, { headers: { authorization: `Bearer ${token}` }, maxPayload: SERVER_MAX_LINE_BYTES });
      const headers = (response: IncomingMessage): void => {
        handshake.headers((name) => {
          const v = response.headers[name];
          return Array.isArray(v) ? v.join(", ") : v;
        });
      };
      socket.on("upgrade", headers);
      socket.on("unexpected-response", (_request, response) => {
        headers(response);
        void readBody(response).then((body) => {
          handshake.refused(response.statusCode ?? 0, body);
          socket.terminate();
        });
      });
      return socket;
    },
  };
}

async function readBody(response: IncomingMessage): Promise<string> {
  response.setEncoding("utf8");
  let body = "";
  try {
    for await (const chunk of response) {
      body += String(chunk);
      if (body.length > REFUSAL_BODY_BYTES) break;
    }
  } catch {
    // What arrived is enough to say why.
  }
  response.destroy();
  return body.slice(0, REFUSAL_BODY_BYTES);
}

/**
 * A client of `/frontend/v2` over `ws`: typed methods, `events()` via `subscribe`, and the
 * agent's approval requests answered by `onApproval` (denied without one).
 */
export function connectWebSocket(options: WebSocketTransportOptions & ClientOptions): OpenAgentsClient {
  return new OpenAgentsClient(new WebSocketTransport({ ...options, opener: options.opener ?? nodeWebSocketOpener(options.token) }), options);
}
