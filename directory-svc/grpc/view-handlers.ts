/**
 * The gRPC edge of the view stream (architecture.md "The view stream"): `WatchView` adapts a
 * server stream to a `ViewSink` (write / drain / end). Updates are encoded once by the publisher; `preEncodedWatchView`
 * lets grpc-js send those bytes as they are instead of serializing per watcher.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../shared/log/logger.js';
import type { ViewEndReason, ViewSink } from '../view/view-watcher.js';
import type { WatchRequest, ViewPublisher } from '../view/view-publisher.js';
import type { WireWatchViewRequest } from '../../shared/view/view-wire.js';

/** What the view handlers read; `ViewPublisher` implements it. */
export type ViewApi = Pick<ViewPublisher, 'watch' | 'unwatch' | 'stats'>;

/** GetStats fields 12–14: the view stream's epoch, version and watchers. */
export function viewStatsFields(view: ViewApi): { view_epoch: string; view_version: string; view_watchers: number } {
  const s = view.stats();
  return { view_epoch: s.epoch, view_version: String(s.version), view_watchers: s.watchers };
}

/**
 * `ended` → status: a lagging watcher gets ABORTED (re-watch: the resume point is gone, a snapshot
 * follows); a stopping directory UNAVAILABLE (fail over to another directory).
 */
const END_STATUS: Readonly<Record<ViewEndReason, grpc.status>> = {
  lagging: grpc.status.ABORTED,
  closing: grpc.status.UNAVAILABLE,
};

/**
 * The service definition with `WatchView` responses passed through when they are already encoded
 * (Buffers from the publisher); anything else is serialized as usual.
 */
export function preEncodedWatchView(service: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const watch = service['WatchView'];
  if (watch === undefined) return service;
  const serialize = watch.responseSerialize;
  return {
    ...service,
    WatchView: { ...watch, responseSerialize: (value: unknown) => (Buffer.isBuffer(value) ? value : serialize(value)) },
  };
}

/** Parses the resume point; a malformed version is treated as a fresh watch (it gets a snapshot). */
export function toWatchRequest(req: Partial<WireWatchViewRequest> | undefined): WatchRequest {
  const v = Number(req?.version ?? '0');
  return { routerId: req?.router_id ?? '', epoch: req?.epoch ?? '', version: Number.isSafeInteger(v) && v >= 0 ? v : -1 };
}

export function viewHandlers(view: ViewApi, log: Logger): grpc.UntypedServiceImplementation {
  const watchView: grpc.handleServerStreamingCall<WireWatchViewRequest, Buffer> = (call) => {
    const req = toWatchRequest(call.request);
    let ended = false;
    const sink: ViewSink = {
      write: (bytes) => call.write(bytes),
      onDrain: (cb) => {
        call.once('drain', cb);
      },
      end: (reason, detail) => {
        if (ended) return;
        ended = true;
        // grpc-js: an 'error' on a server stream becomes its status, then the stream ends.
        call.emit('error', { code: END_STATUS[reason], details: detail });
      },
    };
    let watcher: ReturnType<ViewApi['watch']> | null = null;
    const gone = (): void => {
      ended = true;
      if (watcher !== null) view.unwatch(watcher);
    };
    call.on('cancelled', gone);
    call.on('close', gone);
    try {
      watcher = view.watch(req, sink);
    } catch (e) {
      const detail = e instanceof Error ? e.message : String(e);
      log.error({ rpc: 'WatchView', err: detail }, 'gRPC handler failed');
      if (!ended) call.emit('error', { code: grpc.status.INTERNAL, details: `WatchView: ${detail}` });
      return;
    }
    if (ended) view.unwatch(watcher);
  };
  return { WatchView: watchView };
}
