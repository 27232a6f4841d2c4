/**
 * The SUB side of one stream's event endpoint (kv-events §1): subscribes to the topic bytes,
 * reconnects 100 ms → 5000 ms, and uses ZMTP heartbeats (1000 ms / 5000 ms) so a dead peer
 * surfaces as a disconnect. Converts zeromq's socket events and messages into three callbacks;
 * the state machine never sees zeromq.
 */
import { Subscriber } from 'zeromq';
import type { Logger } from '../../shared/log/logger.js';

export interface EventSocketHandlers {
  /** ZMQ_EVENT_CONNECTED on the event endpoint. */
  onConnected(): void;
  /** ZMQ_EVENT_DISCONNECTED on the event endpoint. */
  onDisconnected(): void;
  /** One live message, frames as received (checked by the decoder, not here). */
  onMessage(frames: readonly Uint8Array[]): void;
}

export const RECONNECT_INTERVAL_MS = 100;
export const RECONNECT_MAX_INTERVAL_MS = 5000;
export const HEARTBEAT_INTERVAL_MS = 1000;
export const HEARTBEAT_TIMEOUT_MS = 5000;

export class EventSocket {
  private readonly sub: Subscriber;
  private closed = false;

  constructor(
    readonly endpoint: string,
    topic: string,
    private readonly handlers: EventSocketHandlers,
    private readonly logger: Logger,
  ) {
    this.sub = new Subscriber({
      linger: 0,
      // ZMQ_IPV6: engines found through AAAA records have tcp://[addr]:port endpoints (engines.md §6).
      ipv6: true,
      reconnectInterval: RECONNECT_INTERVAL_MS,
      reconnectMaxInterval: RECONNECT_MAX_INTERVAL_MS,
      heartbeatInterval: HEARTBEAT_INTERVAL_MS,
      heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
    });
    // §1: the SUB filter equals the topic bytes (it matches a prefix; the decoder checks equality).
    this.sub.subscribe(Buffer.from(topic, 'utf8'));
  }

  /** Starts observing socket events (before connecting, so the first connect is never missed). */
  start(): void {
    void this.watchEvents();
    this.sub.connect(this.endpoint);
    void this.receiveLoop();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.sub.close();
    } catch (e: unknown) {
      this.logger.debug({ err: e }, 'event socket close failed');
    }
  }

  private async watchEvents(): Promise<void> {
    try {
      for await (const ev of this.sub.events) {
        if (this.closed) return;
        if (ev.type === 'connect') this.dispatch(this.handlers.onConnected, undefined);
        else if (ev.type === 'disconnect') this.dispatch(this.handlers.onDisconnected, undefined);
      }
    } catch (e: unknown) {
      if (!this.closed) this.logger.warn({ err: e, endpoint: this.endpoint }, 'event socket monitor ended');
    }
  }

  private async receiveLoop(): Promise<void> {
    for (;;) {
      let frames: Buffer[];
      try {
        frames = await this.sub.receive();
      } catch (e: unknown) {
        if (this.closed) return;
        // Not a stream failure: log and keep reading; a dead peer shows up as a disconnect.
        this.logger.warn({ err: e, endpoint: this.endpoint }, 'event socket receive failed');
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      if (this.closed) return;
      this.dispatch(this.handlers.onMessage, frames);
    }
  }

  /**
   * Handlers throw only on a bug (e.g. an illegal §7 move); one stream's bug must not become an
   * unhandled rejection that takes the whole directory down, so it is logged loudly instead.
   */
  private dispatch<A>(fn: (arg: A) => void, arg: A): void {
    try {
      fn.call(this.handlers, arg);
    } catch (e: unknown) {
      this.logger.error({ err: e, endpoint: this.endpoint }, 'stream handler failed');
    }
  }
}
