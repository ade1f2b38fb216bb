/**
 * The schema check: this package was generated from one exact schema (`SCHEMA_DIGEST`); a runtime
 * says which schema it runs (the `openagents-schema-digest` header, `status.schema_digest`). When
 * they differ, types and validators may not match what the runtime sends or accepts, and the
 * client says so — a warning by default, an error in strict mode. Browser-safe.
 */

import { OpenAgentsError } from "./error.js";
import type { ErrorCode } from "./generated/types.js";
import { PROTOCOL_VERSION, SCHEMA_DIGEST } from "./generated/types.js";

/** What differs between this client's schema and a runtime's. */
export interface SchemaMismatch {
  /** The digest of the schema this client was generated from (`SCHEMA_DIGEST`). */
  readonly clientDigest: string;
  /** The digest the runtime reported. */
  readonly runtimeDigest: string;
  /** The protocol version of this client (`PROTOCOL_VERSION`). */
  readonly clientProtocolVersion: string;
  /** The protocol version the runtime reported, when it did. */
  readonly runtimeProtocolVersion: string | undefined;
  /** Where the client connected: a URL, or the command it ran. */
  readonly where: string;
  /** How the runtime said it: `HTTP response headers`, `the WebSocket handshake`, `status`. */
  readonly via: string;
  /** The whole story, for a person to read. */
  readonly message: string;
}

/**
 * Thrown in strict mode (`strictSchema: true`) by every call once the runtime is known to run
 * another schema than this client was generated from. Not retryable: regenerate the client.
 */
export class SchemaMismatchError extends OpenAgentsError {
  /** The code this class stands for (a client-side code, never sent by a runtime). */
  static override readonly code = "schema_mismatch";
  /** What differs. */
  readonly mismatch: SchemaMismatch;
  constructor(mismatch: SchemaMismatch) {
    super({ code: "schema_mismatch" as ErrorCode, message: mismatch.message, retryable: false });
    this.mismatch = mismatch;
  }
}

/** Describes a mismatch: both digests, both protocol versions, where, and what to do. */
export function schemaMismatch(runtimeDigest: string, runtimeProtocolVersion: string | undefined, where: string, via: string): SchemaMismatch {
  const runtimeVersion = runtimeProtocolVersion ?? "(not reported)";
  const message =
    `schema mismatch: this client was generated from schema ${SCHEMA_DIGEST} (protocol ${PROTOCOL_VERSION}), ` +
    `but the runtime at ${where} runs schema ${runtimeDigest} (protocol ${runtimeVersion}; reported in ${via}). ` +
    `Types and validators may not match what it sends or accepts. Regenerate the client from the runtime's schema ` +
    `(\`make codegen\` in the openagents repository, or upgrade @openagents/client to the runtime's version), ` +
    `or see whether the difference matters with \`openagents-codegen compat OLD NEW\` ` +
    `(OLD: the bundle this client was generated from; NEW: the runtime's \`openagents schema\`).`;
  return { clientDigest: SCHEMA_DIGEST, runtimeDigest, clientProtocolVersion: PROTOCOL_VERSION, runtimeProtocolVersion, where, via, message };
}

/** The default report: `process.emitWarning` (a `SchemaMismatchWarning`) in Node.js, else `console.warn`. */
export function warnSchemaMismatch(mismatch: SchemaMismatch): void {
  const proc = (globalThis as { process?: { emitWarning?: (message: string, options: { type: string; code: string }) => void } }).process;
  if (typeof proc?.emitWarning === "function") {
    proc.emitWarning(mismatch.message, { type: "SchemaMismatchWarning", code: "OPENAGENTS_SCHEMA_MISMATCH" });
  } else {
    console.warn(`SchemaMismatchWarning: ${mismatch.message}`);
  }
}
