// Builders for decoded kv-events (directory-svc/decoder/kv-batch.ts) used by the index suites:
// the index consumes these objects exactly as the decoder produces them.
import type {
  AllBlocksClearedEvent,
  BlockRemovedEvent,
  BlockStoredEvent,
  EngineHash,
  SnapshotBlock,
} from '../../../directory-svc/decoder/kv-batch.js';
import type { TierBits } from '../../../shared/keys/tier-bits.js';
import type { SkipCounters } from '../../../directory-svc/index/stream-index.js';

export const D = 1 as const;
export const H = 2 as const;
export const BOTH = 3 as const;

/** §4 vectors, seed 1024, block_size 4, tokens 1..8. */
export const K0_HEX = 'b0c6037e37a15e2de8d8689c759e965f';
export const K1_HEX = '94600a4a64fa896e3c6f4572bb0437f0';

export function range(a: number, b: number): number[] {
  const out: number[] = [];
  for (let i = a; i <= b; i++) out.push(i);
  return out;
}

export function hash(h: number | bigint): EngineHash {
  return BigInt.asUintN(64, BigInt(h)) as EngineHash;
}

export interface StoredOptions {
  blockSize?: number | null;
  outOfScope?: boolean;
}

export function stored(
  hashes: readonly (number | bigint)[],
  parent: number | bigint | null,
  tokens: readonly number[],
  tier: 1 | 2,
  opts: StoredOptions = {},
): BlockStoredEvent {
  return {
    kind: 'stored',
    blockHashes: BigUint64Array.from(hashes.map((h) => hash(h))),
    parentBlockHash: parent === null ? null : hash(parent),
    tokenIds: Int32Array.from(tokens),
    blockSize: opts.blockSize === undefined ? 4 : opts.blockSize,
    tier,
    outOfScope: opts.outOfScope ?? false,
  };
}

export function removed(hashes: readonly (number | bigint)[], tier: 1 | 2): BlockRemovedEvent {
  return { kind: 'removed', blockHashes: BigUint64Array.from(hashes.map((h) => hash(h))), tier };
}

export function cleared(tiers: TierBits): AllBlocksClearedEvent {
  return { kind: 'cleared', tiers };
}

export function snapshotBlock(
  h: number | bigint,
  parent: number | bigint | null,
  tokens: readonly number[],
  tiers: TierBits,
  outOfScope = false,
): SnapshotBlock {
  return { blockHash: hash(h), parentBlockHash: parent === null ? null : hash(parent), tokenIds: Int32Array.from(tokens), tiers, outOfScope };
}

export function noSkips(): SkipCounters {
  return { outOfScope: 0, descendant: 0, orphan: 0 };
}

export function hexKey(hex: string): Uint8Array {
  return Uint8Array.from(Buffer.from(hex, 'hex'));
}
