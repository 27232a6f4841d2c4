/**
 * Splits a view snapshot into messages of at most `maxBytes` each (architecture.md "The view
 * stream": snapshots in chunks ≤ 4 MiB). A view that fits is one ViewSnapshot, as before; a larger
 * one is ViewSnapshotChunk parts 0..n−1: the instances in part 0, then the streams in order, a
 * stream's residency split into runs of keys wherever a part is full (each run carries the
 * stream's identity and state again). Keys and tiers are subarray views of the exported
 * residency, never copied. Each message is encoded when first asked for (and kept): a watcher
 * takes the next part only once its transport has room, so the parts' encoding is spread over
 * event-loop turns instead of blocking for the whole view. Pure apart from the encoder.
 */
import type { WireViewInstance, WireViewStream } from '../../shared/view/view-wire.js';
import type { WireViewUpdate } from './view-wire.js';

/** architecture.md: the largest view-stream message. */
export const MAX_VIEW_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Bytes per key in a message: 16 key bytes and 1 tier byte. */
const BYTES_PER_KEY = 17;
/** Room kept per stream entry for its identity, state and field framing. */
const STREAM_ENTRY_BYTES = 1024;
/** Room kept per message for the envelope (epoch, version, framing). */
const MESSAGE_SLACK_BYTES = 16 * 1024;

export interface SnapshotHead {
  readonly epoch: string;
  readonly version: number;
  readonly sent_at_ms: number;
}

export type Encode = (update: WireViewUpdate) => Buffer;

/** One message of a snapshot: its bytes, encoded on first call and kept. */
export type LazyMessage = () => Buffer;

function lazy(make: () => Buffer): LazyMessage {
  let bytes: Buffer | null = null;
  return () => (bytes ??= make());
}

function residencyBytes(streams: readonly WireViewStream[]): number {
  let n = 0;
  for (const s of streams) n += (s.tiers?.length ?? 0) * BYTES_PER_KEY + STREAM_ENTRY_BYTES;
  return n;
}

/** The snapshot's messages, in sending order; each encodes to at most `maxBytes` (see the tests). */
export function snapshotMessages(head: SnapshotHead, instances: WireViewInstance[], streams: readonly WireViewStream[], encode: Encode, maxBytes = MAX_VIEW_MESSAGE_BYTES): LazyMessage[] {
  const instanceBytes = encode({ ...head, snapshot: { instances, streams: [] } }).length;
  if (instanceBytes + residencyBytes(streams) + MESSAGE_SLACK_BYTES <= maxBytes) {
    const whole = streams.slice();
    return [lazy(() => encode({ ...head, snapshot: { instances, streams: whole } }))];
  }
  const parts: { instances: WireViewInstance[]; streams: WireViewStream[] }[] = [];
  let current = { instances, streams: [] as WireViewStream[] };
  let used = instanceBytes + MESSAGE_SLACK_BYTES;
  const flush = (): void => {
    parts.push(current);
    current = { instances: [], streams: [] };
    used = MESSAGE_SLACK_BYTES;
  };
  for (const s of streams) {
    const keys = s.keys ?? new Uint8Array(0);
    const tiers = s.tiers ?? new Uint8Array(0);
    let offset = 0;
    for (;;) {
      let room = Math.floor((maxBytes - used - STREAM_ENTRY_BYTES) / BYTES_PER_KEY);
      if (room <= 0 && current.streams.length + current.instances.length > 0) {
        flush();
        room = Math.floor((maxBytes - used - STREAM_ENTRY_BYTES) / BYTES_PER_KEY);
      }
      const take = Math.max(0, Math.min(tiers.length - offset, room));
      current.streams.push({ ...s, keys: keys.subarray(offset * 16, (offset + take) * 16), tiers: tiers.subarray(offset, offset + take) });
      used += take * BYTES_PER_KEY + STREAM_ENTRY_BYTES;
      offset += take;
      if (offset >= tiers.length) break;
      flush();
    }
  }
  if (current.streams.length + current.instances.length > 0 || parts.length === 0) parts.push(current);
  return parts.map((p, index) => lazy(() => encode({ ...head, snapshot_chunk: { index, last: index === parts.length - 1, instances: p.instances, streams: p.streams } })));
}
