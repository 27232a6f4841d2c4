// A router-side model of the view stream for tests and the propagation benchmark: applies decoded
// ViewUpdates (snapshot, then ordered deltas, heartbeats) to plain Maps exactly as
// proto/kvdirectory.proto documents the order, and refuses anything out of order.
import { protoViewUpdateDecoder } from '../../directory-svc/view/view-update-encoder.js';
import type { WireViewInstance, WireViewStream, WireViewUpdate } from '../../shared/view/view-wire.js';

/** A ViewUpdate as a watcher decodes it: the shared wire shape (keepCase, longs String, oneofs). */
export type DecodedViewUpdate = WireViewUpdate;

const decoder = protoViewUpdateDecoder();
/** What an absent `bytes` field stands for (decoded with defaults it is already empty). */
const NO_BYTES = new Uint8Array(0);

export function decodeViewUpdate(bytes: Buffer): DecodedViewUpdate {
  return decoder(bytes) as DecodedViewUpdate;
}

export interface ModelStream {
  state: WireViewStream;
  /** key hex → tier bits (never 0). */
  residency: Map<string, number>;
}

function fillResidency(into: Map<string, number>, keyBytes: Uint8Array, tiers: Uint8Array): void {
  if (keyBytes.length !== tiers.length * 16) throw new Error(`keys ${keyBytes.length} bytes for ${tiers.length} tiers`);
  const keys = Buffer.from(keyBytes.buffer, keyBytes.byteOffset, keyBytes.length);
  for (let i = 0; i < tiers.length; i++) {
    const hex = keys.toString('hex', i * 16, i * 16 + 16);
    const t = tiers[i]!;
    if (t === 0) into.delete(hex);
    else into.set(hex, t);
  }
}

export class ViewModel {
  epoch = '';
  /** Last applied version; -1 before the first snapshot. */
  version = -1;
  readonly instances = new Map<string, WireViewInstance>();
  readonly streams = new Map<number, ModelStream>();
  snapshots = 0;
  deltas = 0;
  heartbeats = 0;

  /** Applies one update atomically (synchronously); throws on a gap or a foreign epoch. */
  apply(u: DecodedViewUpdate): void {
    const version = Number(u.version);
    if (u.body === 'snapshot') {
      const s = u.snapshot!;
      this.epoch = u.epoch;
      this.version = version;
      this.instances.clear();
      this.streams.clear();
      for (const i of s.instances) this.instances.set(i.name, i);
      for (const st of s.streams) {
        const residency = new Map<string, number>();
        fillResidency(residency, st.keys ?? NO_BYTES, st.tiers ?? NO_BYTES);
        this.streams.set(st.stream_id, { state: st, residency });
      }
      this.snapshots++;
      return;
    }
    if (u.epoch !== this.epoch) throw new Error(`update of epoch ${u.epoch} while holding ${this.epoch}`);
    if (u.body === 'heartbeat') {
      this.heartbeats++;
      return;
    }
    if (version !== this.version + 1) throw new Error(`delta ${version} after ${this.version}`);
    const d = u.delta!;
    for (const n of d.instance_removals) this.instances.delete(n);
    for (const i of d.instance_upserts) this.instances.set(i.name, i);
    for (const id of d.stream_removals) this.streams.delete(id);
    for (const st of d.stream_upserts) {
      const cur = this.streams.get(st.stream_id);
      if (cur === undefined) this.streams.set(st.stream_id, { state: st, residency: new Map() });
      else cur.state = st;
    }
    for (const st of d.stream_resets) {
      const residency = new Map<string, number>();
      fillResidency(residency, st.keys ?? NO_BYTES, st.tiers ?? NO_BYTES);
      this.streams.set(st.stream_id, { state: st, residency });
    }
    for (const r of d.residency) {
      const cur = this.streams.get(r.stream_id);
      if (cur === undefined) throw new Error(`residency for unknown stream ${r.stream_id}`);
      fillResidency(cur.residency, r.keys, r.tiers);
    }
    this.version = version;
    this.deltas++;
  }

  streamByName(instanceName: string, dpRank: number): ModelStream | null {
    for (const s of this.streams.values()) if (s.state.instance_name === instanceName && s.state.dp_rank === dpRank) return s;
    return null;
  }
}

/** The residency of an exportResidency() result as key hex → tiers. */
export function residencyMap(r: { keys: Uint8Array; tiers: Uint8Array }): Map<string, number> {
  const out = new Map<string, number>();
  fillResidency(out, r.keys, r.tiers);
  return out;
}
