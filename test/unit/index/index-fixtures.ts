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
import { PLAIN_IDENTITY, type KeyIdentity } from '../../../shared/keys/cache-identity.js';
import type { SkipCounters } from '../../../directory-svc/index/stream-index.js';
import { isStreamError, type StreamErrorClass } from '../../../directory-svc/errors/stream-errors.js';

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
  /** cache-identity §3–§4: the chain's identity (plain by default). */
  identity?: KeyIdentity;
  /** Blocks before the first multimodal one (all by default). */
  reproducibleBlocks?: number;
  /** group_idx (0 by default) and whether its kind is a reusable prefix (true by default). */
  group?: number;
  reusableGroup?: boolean;
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
    identity: opts.identity ?? PLAIN_IDENTITY,
    reproducibleBlocks: opts.reproducibleBlocks ?? hashes.length,
    group: opts.group ?? 0,
    reusableGroup: opts.reusableGroup ?? true,
  };
}

export function removed(hashes: readonly (number | bigint)[], tier: 1 | 2, group = 0): BlockRemovedEvent {
  return { kind: 'removed', blockHashes: BigUint64Array.from(hashes.map((h) => hash(h))), tier, group };
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
  identity: KeyIdentity = PLAIN_IDENTITY,
  multimodal = false,
): SnapshotBlock {
  return { blockHash: hash(h), parentBlockHash: parent === null ? null : hash(parent), tokenIds: Int32Array.from(tokens), tiers, outOfScope, multimodal, identity };
}

export function noSkips(): SkipCounters {
  return { outOfScope: 0, descendant: 0, orphan: 0 };
}

export function hexKey(hex: string): Uint8Array {
  return Uint8Array.from(Buffer.from(hex, 'hex'));
}

/** The error class thrown by fn (tests match on class, kv-events §10), or null. */
export function errorClassOf(fn: () => void): StreamErrorClass | null {
  try {
    fn();
  } catch (e) {
    if (isStreamError(e)) return e.class;
    throw e;
  }
  return null;
}
