/**
 * Errors a client throws. A runtime's typed failure (`RuntimeSubmitError`) becomes an instance of
 * the class generated for its code (`BusyError`, `InterruptedError`, ...), each a subclass of
 * `OpenAgentsError`; codes this version does not know become `UnknownCodeError`.
 *
 * Failures that never reached a runtime's answer have classes of their own: `TransportError`
 * (the connection, the process, or the HTTP exchange failed) and `ProtocolError` (the peer
 * answered something the schema does not allow).
 */

import type { ErrorCode, ErrorDetails, RuntimeSubmitError } from "./generated/types.js";
import { ERROR_CODE_INFO, ERROR_CODE_UNKNOWN, isKnownErrorCode } from "./generated/types.js";
import type { Violation } from "./rt.js";

/** A typed failure from a runtime: one subclass per error code. */
export class OpenAgentsError extends Error {
  /** The code a subclass stands for (`""` on the base class). */
  static readonly code: string = "";
  /** The stable error code. */
  readonly code: ErrorCode;
  /** Whether the same request may succeed if sent again later. */
  readonly retryable: boolean;
  /** The JSON-RPC numeric code the runtime answered with. */
  readonly rpcCode: number;
  /** Structured details (violations, known runners, lease holder, limit), when the runtime gave them. */
  readonly details: ErrorDetails | undefined;
  /** The typed error as the runtime sent it. */
  readonly data: RuntimeSubmitError;

  constructor(data: RuntimeSubmitError, rpcCode?: number, options?: { cause?: unknown }) {
    super(data.message, options);
    this.name = new.target.name;
    this.code = data.code;
    this.retryable = data.retryable;
    this.details = data.details;
    this.data = data;
    this.rpcCode = rpcCode ?? (isKnownErrorCode(data.code) ? ERROR_CODE_INFO[data.code].rpcCode : ERROR_CODE_UNKNOWN.rpcCode);
  }
}

/** A code this version of the client does not know; never retryable, whatever the peer says. */
export class UnknownCodeError extends OpenAgentsError {
  constructor(data: RuntimeSubmitError, rpcCode?: number, options?: { cause?: unknown }) {
    super({ ...data, retryable: ERROR_CODE_UNKNOWN.retryable }, rpcCode, options);
  }
}

/** The exchange with the runtime failed: no answer was read (connection, process, HTTP). */
export class TransportError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TransportError";
  }
}

/** The runtime answered something the schema does not allow; `violations` says what. */
export class ProtocolError extends Error {
  /** Each violation, by JSON pointer into the offending message. */
  readonly violations: readonly Violation[];
  constructor(message: string, violations: readonly Violation[] = []) {
    super(violations.length ? `${message}: ${violations.map((v) => `${v.pointer || "(root)"}: ${v.message}`).join("; ")}` : message);
    this.name = "ProtocolError";
    this.violations = violations;
  }
}
