/**
 * The Node.js entry point: everything in `@openagents/client`, plus the stdio transport, which
 * runs `openagents serve --stdio` as a child process.
 *
 * ```ts
 * import { connectStdio } from "@openagents/client/node";
 * const client = connectStdio({ runner: "echo" });
 * const { result } = await client.submit({ task: "hello" });
 * await client.close();
 * ```
 */

import { OpenAgentsClient } from "./client.js";
import type { ClientOptions } from "./client.js";
import { StdioTransport } from "./stdio.js";
import type { StdioTransportOptions } from "./stdio.js";

export * from "./index.js";
export { StdioTransport } from "./stdio.js";
export type { StdioTransportOptions } from "./stdio.js";
export { LineReader, LineTooLongError } from "./lines.js";

/** A client of a runtime started as a child process (`openagents serve --stdio --runner ID`). */
export function connectStdio(options: StdioTransportOptions & ClientOptions): OpenAgentsClient {
  return new OpenAgentsClient(StdioTransport.spawn(options), options);
}
