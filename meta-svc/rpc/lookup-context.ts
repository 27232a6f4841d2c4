/**
 * What every read-side RPC of the data path shares (kvcm-meta §5.3, §9.3): the selection context
 * of one request (instance view, §7.10 visibility, `nowMs`, spec filter) and the
 * `kvcm_lookup_blocks_total{api,result}` counts.
 */
import type { DataPathInstance } from '../lookup/data-path-instance.js';
import type { SelectionContext } from '../lookup/location-selection.js';
import type { DataPath } from '../write/data-path.js';

/** The §5.3 selection context of one request, read at its start. */
export function selectionContext(dp: DataPath, instance: DataPathInstance, specFilter: ReadonlySet<string> | null): SelectionContext {
  return { instance, visibility: dp.visibility, nowMs: dp.timers.nowMs(), specFilter };
}

/** §9.3 per-key lookup outcomes of one request. */
export function countLookup(dp: DataPath, api: string, hit: number, miss: number, masked: number): void {
  if (hit > 0) dp.metrics.lookupBlocksTotal.inc({ api, result: 'hit' }, hit);
  if (miss > 0) dp.metrics.lookupBlocksTotal.inc({ api, result: 'miss' }, miss);
  if (masked > 0) dp.metrics.lookupBlocksTotal.inc({ api, result: 'masked' }, masked);
}
