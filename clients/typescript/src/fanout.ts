/**
 * Local subscribers of one connection's event stream (stdio, WebSocket): the runtime keeps one
 * stream per connection, restarted by `subscribe`; each subscription of this client takes what
 * it has not seen yet, in order. Browser-safe.
 */

import { TransportError } from "./error.js";
import { SERVER_EVENT_CHANNEL_CAPACITY } from "./generated/types.js";
import { isObject } from "./rt.js";
import type { EventSubscription } from "./transport.js";

/**
 * One local subscriber of the connection's notifications. It holds at most
 * `SERVER_EVENT_CHANNEL_CAPACITY` events; a reader that falls further behind misses the oldest
 * and is told with a `lagged` event, as the runtime tells its own subscribers.
 */
export class LocalSubscription implements EventSubscription {
  readonly ready: Promise<void>;
  markReady!: () => void;
  failReady!: (e: unknown) => void;
  private readonly queue: unknown[] = [];
  private missed = 0;
  private lastSeq: number;
  /**
   * Whether the stream has reached this subscriber's starting point. Until then (a `since`
   * subscription, while the connection's stream restarts) only the next event in sequence is
   * taken: the old stream's events are replayed by the new one in order.
   */
  private synced: boolean;
  private ended = false;
  /** Why the stream ended, thrown to the reader once it has read what came before. */
  private error: unknown = undefined;
  private waiter: (() => void) | null = null;
  private readonly onClose: () => void;

  constructor(onClose: () => void, since?: number) {
    this.onClose = onClose;
    this.lastSeq = since ?? 0;
    this.synced = since === undefined;
    this.ready = new Promise<void>((resolve, reject) => {
      this.markReady = resolve;
      this.failReady = reject;
    });
    this.ready.catch(() => undefined);
  }

  /** The sequence number of the newest event this subscriber has taken (or its `since`). */
  get position(): number {
    return this.lastSeq;
  }

  /** Takes no event up to `seq` (the stream's position when this subscriber joined it). */
  skipThrough(seq: number): void {
    if (this.synced) this.lastSeq = Math.max(this.lastSeq, seq);
  }

  push(ev: unknown): void {
    if (this.ended) return;
    if (isObject(ev) && typeof ev.seq === "number" && isObject(ev.event)) {
      const kind = ev.event.type;
      if (kind === "gap" && typeof ev.event.resumed_at === "number") {
        // The runtime no longer holds the events up to `resumed_at`: carry on from there. When
        // the gap answers this subscriber's own resume point, also back from it: a point ahead
        // of the runtime's newest event (it restarted since) is replayed from the oldest event
        // held, and those events are new here. Another subscriber's gap never moves this one back.
        const resumedAt = ev.event.resumed_at;
        this.lastSeq = ev.event.since === this.lastSeq ? resumedAt : Math.max(this.lastSeq, resumedAt);
        this.synced = true;
      } else if (kind !== "lagged") {
        if (ev.seq <= this.lastSeq) return; // Replayed after a restart: seen already.
        if (!this.synced && ev.seq !== this.lastSeq + 1) return; // The old stream, ahead of the replay.
        this.synced = true;
        this.lastSeq = ev.seq;
      }
    }
    if (this.queue.length >= SERVER_EVENT_CHANNEL_CAPACITY) {
      this.queue.shift();
      this.missed += 1;
    }
    this.queue.push(ev);
    this.wake();
  }

  /** Ends the stream: quietly, or with `error` thrown to the reader after the queued events. */
  end(error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.error = error;
    this.failReady(error ?? new TransportError("the runtime has gone"));
    this.wake();
  }

  close(): void {
    this.end();
    this.onClose();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<unknown> {
    try {
      for (;;) {
        if (this.missed > 0) {
          const missed = this.missed;
          this.missed = 0;
          yield { seq: this.lastSeq, event: { type: "lagged", missed } };
          continue;
        }
        const ev = this.queue.shift();
        if (ev !== undefined) {
          yield ev;
          if (isObject(ev) && isObject(ev.event) && ev.event.type === "shutting_down") return;
          continue;
        }
        if (this.ended) {
          if (this.error !== undefined) throw this.error;
          return;
        }
        await new Promise<void>((resolve) => {
          this.waiter = resolve;
        });
      }
    } finally {
      this.close();
    }
  }
}
