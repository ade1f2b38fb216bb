/**
 * The part of `ws` (the package's one runtime dependency) that `node.ts` uses, declared here so
 * the package needs no `@types/ws`. Compile-time only: nothing of it reaches `dist/`.
 */
declare module "ws" {
  import { EventEmitter } from "node:events";
  import type { ClientRequest, IncomingMessage } from "node:http";

  interface ClientOptions {
    headers?: { [name: string]: string };
    maxPayload?: number;
  }

  class WebSocket extends EventEmitter {
    constructor(address: string, protocols?: string | string[], options?: ClientOptions);
    readonly readyState: number;
    readonly protocol: string;
    send(data: string): void;
    close(code?: number, reason?: string): void;
    terminate(): void;
    addEventListener(type: "open", listener: () => void): void;
    addEventListener(type: "message", listener: (event: { readonly data: unknown }) => void): void;
    addEventListener(type: "close", listener: (event: { readonly code: number; readonly reason: string }) => void): void;
    addEventListener(type: "error", listener: (event: unknown) => void): void;
    on(event: "upgrade", listener: (response: IncomingMessage) => void): this;
    on(event: "unexpected-response", listener: (request: ClientRequest, response: IncomingMessage) => void): this;
  }

  export default WebSocket;
}
