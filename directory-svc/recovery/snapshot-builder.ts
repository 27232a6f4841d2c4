/**
 * Builds a fresh index from one snapshot reply (kv-events §6 "Building"), block by block in
 * reply order without look-ahead. The reply-level rules (one watermark W across chunks, at least
 * one chunk before the terminator) are the decoder's SnapshotAssembler's; this module feeds it
 * and the index. Pure: no sockets or timers.
 */
import type { SnapshotMessage } from '../decoder/snapshot-decoder.js';
import { SnapshotAssembler } from '../decoder/snapshot-decoder.js';
import type { SnapshotBlock } from '../decoder/kv-batch.js';
import type { SkipCounters } from '../index/stream-index.js';

/** What the builder needs from an index (StreamIndex satisfies it). */
export interface SnapshotTarget {
  addSnapshotBlock(block: SnapshotBlock, skipped: SkipCounters): void;
}

export class SnapshotBuilder {
  private readonly assembler = new SnapshotAssembler();

  constructor(
    private readonly target: SnapshotTarget,
    private readonly skipped: SkipCounters,
  ) {}

  /**
   * One decoded reply message. Returns W at the terminator, null after a chunk. Throws
   * ProtocolError (mixed W, no chunk, duplicate hash, token count) or LimitError (entry budget).
   */
  accept(msg: SnapshotMessage): bigint | null {
    this.assembler.accept(msg);
    if (msg.kind === 'terminator') {
      // accept() guarantees a chunk came first, so W is set.
      return this.assembler.watermark as bigint;
    }
    const blocks = msg.blocks;
    const target = this.target;
    const skipped = this.skipped;
    for (let i = 0; i < blocks.length; i++) target.addSnapshotBlock(blocks[i], skipped);
    return null;
  }
}
