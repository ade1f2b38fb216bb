/**
 * Calling any JSON-RPC 2.0 service through a `Transport`: what a client of methods generated from
 * any schema (`openagents-codegen typescript`: an abstract `GeneratedMethods` over `call`) needs to
 * implement `call`. Nothing here knows a method of ours.
 */

import { ProtocolError } from "./error.js";
import type { RequestOptions, Transport } from "./transport.js";

/** A JSON-RPC error a service answered: its code, message and data as sent. */
export class RpcError extends Error {
  /** The JSON-RPC error code. */
  readonly code: number;
  /** The error's `data`, when the service gave one (for a generated service, its error code). */
  readonly data: unknown;
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = "RpcError";
    this.code = code;
    this.data = data;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Sends `method` with `params` through `transport` and resolves with the response's `result`.
 *
 * @throws RpcError when the service answers with an error object.
 * @throws ProtocolError when the answer is not a JSON-RPC response.
 * @throws TransportError when no answer could be read.
 */
export async function rpcCall(transport: Transport, method: string, params: unknown, options?: RequestOptions): Promise<unknown> {
  const response = await transport.request(method, params, options);
  if (!isObject(response)) throw new ProtocolError(`the answer to \`${method}\` is not a JSON-RPC response object`);
  if ("error" in response) {
    const e = response["error"];
    if (!isObject(e) || typeof e["code"] !== "number" || typeof e["message"] !== "string") {
      throw new ProtocolError(`the error answering \`${method}\` is not a JSON-RPC error object`);
    }
    throw new RpcError(e["code"], e["message"], e["data"]);
  }
  if (!("result" in response)) throw new ProtocolError(`the answer to \`${method}\` has neither \`result\` nor \`error\``);
  return response["result"];
}
