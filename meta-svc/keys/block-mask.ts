/**
 * BlockMask (kvcm-meta §3, §4.4): oneof `offset` | `bool_masks.values`. Index i is in the mask
 * when `offset` is set and i < offset, or values[i] is true; neither member = nothing masked.
 * What "in the mask" means is the RPC's business; this module only parses, validates and prints.
 */
import { MetaError } from '../meta-errors.js';
import type { RequestReader } from '../wire/request-reader.js';

export type BlockMask =
  | { readonly kind: 'none' }
  | { readonly kind: 'offset'; readonly offset: number }
  | { readonly kind: 'bools'; readonly values: readonly boolean[] };

export const NO_MASK: BlockMask = { kind: 'none' };

/** Reads a BlockMask sub-message (null = absent). Both oneof members set is an invalid mask. */
export function readBlockMask(msg: RequestReader | null, field: string): BlockMask {
  if (msg === null) return NO_MASK;
  const hasOffset = msg.has('offset');
  const bools = msg.message('bool_masks');
  if (hasOffset && bools !== null) {
    throw new MetaError('INVALID_ARGUMENT', `${field}: both offset and bool_masks set (§4.4)`);
  }
  if (hasOffset) return { kind: 'offset', offset: msg.int32('offset') };
  if (bools !== null) return { kind: 'bools', values: bools.boolList('values') };
  return NO_MASK;
}

/**
 * §4.4 validity against `n` indexes: 0 ≤ offset ≤ n; len(values) == n, or ≤ n when
 * `allowShorter` (finishWriteCache `success_blocks`). Invalid → INVALID_ARGUMENT, no side effect.
 */
export function checkBlockMask(mask: BlockMask, n: number, field: string, allowShorter = false): void {
  if (mask.kind === 'offset' && (mask.offset < 0 || mask.offset > n)) {
    throw new MetaError('INVALID_ARGUMENT', `${field}: offset ${mask.offset} outside [0, ${n}] (§4.4)`);
  }
  if (mask.kind === 'bools') {
    const len = mask.values.length;
    if (allowShorter ? len > n : len !== n) {
      throw new MetaError('INVALID_ARGUMENT', `${field}: ${len} bool_masks values for ${n} keys (§4.4)`);
    }
  }
}

export function isMasked(mask: BlockMask, i: number): boolean {
  if (mask.kind === 'offset') return i < mask.offset;
  if (mask.kind === 'bools') return mask.values[i] === true;
  return false;
}

/** §6 step 3 wire form: exactly [0, k) set → `{offset: k}` (0 and n included), else bool_masks. */
export function blockMaskToWire(inMask: readonly boolean[]): { offset: number } | { bool_masks: { values: boolean[] } } {
  let k = 0;
  while (k < inMask.length && inMask[k]) k++;
  let prefixOnly = true;
  for (let i = k; i < inMask.length; i++) {
    if (inMask[i]) {
      prefixOnly = false;
      break;
    }
  }
  return prefixOnly ? { offset: k } : { bool_masks: { values: inMask.slice() } };
}
