/**
 * The scale benchmark's `snapshot_build` phase (architecture.md "The view stream"): a router
 * joins the full view, and the directory's event loop is watched while the snapshot is built and
 * sent (perf_hooks monitorEventLoopDelay, max and p99), then the messages are applied to a
 * router's ViewCache one at a time, timing each synchronous step (protobuf decode; then decode
 * and apply, a snapshot part in steps of APPLY_STEP_KEYS keys), as the router's client does.
 *
 * The view is attached to the filled streams through a ViewTap each stream was observed with from
 * the start (no per-key listener: the taps forward only the stream-level events, so the fill is
 * measured as before). Each stream then tells the view its state and served index as a subscriber
 * does on entering SYNCHRONIZED; the residency handed with it is left empty because only the
 * snapshot (which reads the served slots) is measured here, not the deltas.
 *
 * The transport takes one message per event-loop turn (write reports full, drain on the next
 * turn), as a gRPC stream with a bounded buffer does; the snapshot is over when the first
 * heartbeat follows it (heartbeats go only to caught-up watchers).
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { ServedIndex, StreamListener } from '../../directory-svc/subscription/stream-observer.js';
import type { StreamState } from '../../directory-svc/subscription/stream-state.js';
import type { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import { ViewPublisher } from '../../directory-svc/view/view-publisher.js';
import { protoViewUpdateDecoder } from '../../directory-svc/view/view-update-encoder.js';
import { ViewCache } from '../../router-svc/viewcache/view-cache.js';
import { APPLY_STEP_KEYS } from '../../router-svc/viewcache/view-client.js';
import { decodeViewUpdate } from '../../router-svc/viewcache/view-update.js';
import type { WireViewUpdate } from '../../shared/view/view-wire.js';

/** A heartbeat is a few dozen bytes; every snapshot message is larger. */
const HEARTBEAT_MAX_BYTES = 256;
const EMPTY = new Uint8Array(0);

/** Forwards a stream's stream-level events to the view once one is attached (none before). */
export class ViewTap implements StreamListener {
  target: StreamListener | null = null;
  batchApplied(sequence: bigint, deviceBlocks: number, hostBlocks: number): void {
    this.target?.batchApplied?.(sequence, deviceBlocks, hostBlocks);
  }
  stateChanged(state: StreamState, error: string, sequence: bigint): void {
    this.target?.stateChanged?.(state, error, sequence);
  }
  streamClosed(): void {
    this.target?.streamClosed?.();
  }
}

export interface SnapshotBuildResult {
  readonly [field: string]: unknown;
}

/** The snapshot of every stream in `subs` (all SYNCHRONIZED and full) taken by one router. */
export async function measureSnapshotBuild(subs: readonly StreamSubscriber[], taps: readonly ViewTap[], servedOf: (sub: StreamSubscriber) => ServedIndex): Promise<SnapshotBuildResult> {
  const view = new ViewPublisher({ flushIntervalMs: 10 });
  try {
    subs.forEach((sub, i) => {
      const listener = view.addStream(sub.config);
      taps[i]!.target = listener;
      listener.stateChanged?.(sub.state, sub.error, sub.sequence);
      listener.indexReplaced?.(sub.sequence, servedOf(sub), { keys: EMPTY, tiers: EMPTY });
    });
    view.flush();
    const messages: Buffer[] = [];
    let maxMessageBytes = 0;
    let done: (() => void) | null = null;
    const finished = new Promise<void>((r) => (done = r));
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    // The histogram's first interval is not recorded: let it start before the router joins.
    await new Promise((r) => setTimeout(r, 20));
    const t0 = performance.now();
    view.watch(
      { routerId: 'bench', epoch: '', version: 0 },
      {
        write: (bytes) => {
          if (bytes.length <= HEARTBEAT_MAX_BYTES && messages.length > 0) done?.();
          else {
            messages.push(bytes);
            maxMessageBytes = Math.max(maxMessageBytes, bytes.length);
          }
          return false;
        },
        onDrain: (cb) => setImmediate(cb),
        end: () => done?.(),
      },
    );
    const watchMs = performance.now() - t0;
    await finished;
    const sendMs = performance.now() - t0;
    delay.disable();
    const stats = view.stats();
    // The router side, message by message, as its client applies them.
    const cache = new ViewCache({ staleAfterMs: 3_600_000 });
    await cache.hashers.ensure([...new Set(subs.map((s) => s.config.hashSeed))]);
    const protoDecode = protoViewUpdateDecoder();
    let maxDecodeMs = 0;
    let maxApplyMs = 0;
    let applySteps = 0;
    let bytes = 0;
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      bytes += m.length;
      messages[i] = EMPTY as Buffer;
      const a = performance.now();
      const wire = protoDecode(m) as WireViewUpdate;
      let b = performance.now();
      maxDecodeMs = Math.max(maxDecodeMs, b - a);
      const u = decodeViewUpdate(wire);
      // As the view client does: a part in steps of APPLY_STEP_KEYS keys, one turn each.
      for (let more = true; more; ) {
        more = !cache.applyStep(u, 0, APPLY_STEP_KEYS);
        const c = performance.now();
        maxApplyMs = Math.max(maxApplyMs, c - b);
        applySteps++;
        b = c;
      }
    }
    const held = cache.streams().reduce((n, s) => n + s.deviceBlocks, 0);
    const want = subs.reduce((n, s) => n + (s.index?.deviceBlocks ?? 0), 0);
    if (held !== want || cache.streams().length !== subs.length) throw new Error(`router view holds ${held} of ${want} blocks in ${cache.streams().length} of ${subs.length} streams`);
    const round2 = (x: number): number => Math.round(x * 100) / 100;
    return {
      metric: 'snapshot_build',
      streams: subs.length,
      blocks: want,
      messages: messages.length,
      max_message_bytes: maxMessageBytes,
      snapshot_bytes: bytes,
      watch_call_ms: round2(watchMs),
      build_and_send_ms: round2(sendMs),
      event_loop_delay_max_ms: round2(delay.max / 1e6),
      event_loop_delay_p99_ms: round2(delay.percentile(99) / 1e6),
      slices: stats.snapshotSlices,
      slice_max_key_ids: stats.snapshotSliceMaxKeyIds,
      router_max_decode_ms: round2(maxDecodeMs),
      router_max_apply_ms: round2(maxApplyMs),
      router_apply_steps: applySteps,
    };
  } finally {
    for (const t of taps) t.target = null;
    view.close();
  }
}
