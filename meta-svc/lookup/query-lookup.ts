/**
 * The three lookup shapes of kvcm-meta §5.3 over per-key selections, shared by
 * getCacheLocation and getCacheLocationLen so the two are always consistent (§5.2).
 * Pure: `selected[i]` is the §5.3 selection of key i (null = miss), computed by the caller.
 */
import { QueryType } from '../meta-enums.js';
import { MetaError } from '../meta-errors.js';

/** §5.3 query type after defaults; MAMBA → UNSUPPORTED everywhere (§2). */
export function effectiveQueryType(requested: number, instanceDefault: number): number {
  let q = requested;
  if (q === QueryType.QT_UNSPECIFIED) q = instanceDefault;
  if (q === QueryType.QT_UNSPECIFIED) q = QueryType.QT_PREFIX_MATCH;
  if (q === QueryType.QT_PREFIX_MATCH_WITH_MAMBA) {
    throw new MetaError('UNSUPPORTED', 'QT_PREFIX_MATCH_WITH_MAMBA is not supported');
  }
  return q;
}

/** §5.3 REVERSE_ROLL_SW_MATCH: 0 ≤ sw_size ≤ n, else INVALID_ARGUMENT. */
export function checkSwSize(swSize: number, n: number): void {
  if (swSize < 0 || swSize > n) {
    throw new MetaError('INVALID_ARGUMENT', `sw_size ${swSize} outside [0, ${n}] (§5.3)`);
  }
}

/**
 * Largest e ∈ [sw, n] whose keys [e−sw, e) all hit; 0 when sw = 0 or there is no window.
 * Cost: one backwards pass.
 */
export function reverseRollWindowEnd(hit: ArrayLike<boolean>, swSize: number): number {
  const n = hit.length;
  if (swSize === 0) return 0;
  let run = 0;
  // Scan from the end: the first run of ≥ sw hits found, ending at the largest e, wins.
  let e = n;
  for (let i = n - 1; i >= 0; i--) {
    if (hit[i]) {
      run++;
      if (run >= swSize) return e;
    } else {
      run = 0;
      e = i;
    }
  }
  return 0;
}
