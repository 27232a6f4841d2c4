/**
 * A snapshot sent in several messages (proto ViewSnapshotChunk; architecture.md: ≤ 4 MiB per
 * message), assembled beside the live view: parts must come in order (index 0, 1, …) with the
 * first part's epoch and version; a stream that spans parts has its keys/tiers concatenated in
 * part order. The cache applies the assembled snapshot, whole, on the last part. Pure.
 */
import type { DecodedSnapshot, DecodedSnapshotChunk, DecodedViewStream, RouterInstance } from './view-update.js';
import { ViewProtocolError } from './view-errors.js';

interface StreamParts {
  readonly stream: DecodedViewStream;
  readonly keys: Uint8Array[];
  readonly tiers: Uint8Array[];
}

export class SnapshotAssembly {
  readonly epoch: string;
  readonly version: bigint;
  private nextIndex = 0;
  private readonly instances: RouterInstance[] = [];
  private readonly streams = new Map<number, StreamParts>();

  /** Starts from part 0. */
  constructor(first: DecodedSnapshotChunk) {
    if (first.index !== 0) throw new ViewProtocolError(`snapshot part ${first.index} of ${first.epoch}/${first.version} without part 0`);
    this.epoch = first.epoch;
    this.version = first.version;
    this.add(first);
  }

  /** Adds the next part; true when it was the last. Throws ViewProtocolError when out of order. */
  add(c: DecodedSnapshotChunk): boolean {
    if (c.epoch !== this.epoch || c.version !== this.version || c.index !== this.nextIndex) {
      throw new ViewProtocolError(`snapshot part ${c.index} of ${c.epoch}/${c.version} where part ${this.nextIndex} of ${this.epoch}/${this.version} was due`);
    }
    this.nextIndex++;
    for (const inst of c.instances) this.instances.push(inst);
    for (const s of c.streams) {
      let p = this.streams.get(s.streamId);
      if (p === undefined) this.streams.set(s.streamId, (p = { stream: s, keys: [], tiers: [] }));
      p.keys.push(s.keys);
      p.tiers.push(s.tiers);
    }
    return c.last;
  }

  /** The whole snapshot (call after the last part). */
  snapshot(sentAtMs: number): DecodedSnapshot {
    const streams: DecodedViewStream[] = [];
    for (const p of this.streams.values()) {
      streams.push({ ...p.stream, keys: Buffer.concat(p.keys), tiers: Buffer.concat(p.tiers) });
    }
    return { kind: 'snapshot', epoch: this.epoch, version: this.version, sentAtMs, instances: this.instances, streams };
  }
}
