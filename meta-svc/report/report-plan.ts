/**
 * The execution plan of one reportEvent request (kvcm-meta §7.2 steps 3–5), pure: the §7.3
 * shape check, every item validated (§7.4) before any executes, and the valid items grouped
 * into units: all REGISTERs merged at the first one's position, each maximal run of
 * consecutive ADD/DELETE one delta unit, every other item a unit of its own. The executor runs
 * the units in order.
 *
 * A delta or snapshot unit carries its items inline, or, for a request the report worker
 * parsed off the event loop, a reference to the items that stay in the worker (`offloaded`).
 */
import type { DecodedEvent, ValidBlock } from './report-events.js';
import { isAllowedShape, validateEvent } from './report-events.js';
import type { DeltaEvent } from './report-mutations.js';

/** Items kept by the report worker: `unit` of parse job `job`, `size` items (events or blocks). */
export interface OffloadedWork {
  readonly kind: 'offloaded';
  readonly job: number;
  readonly unit: number;
  readonly size: number;
}

export type DeltaWork = { readonly kind: 'inline'; readonly events: readonly DeltaEvent[] } | OffloadedWork;
export type SnapshotWork = { readonly kind: 'inline'; readonly blocks: readonly ValidBlock[] } | OffloadedWork;

/** Item indexes of a unit: request positions that share its result. */
export type ItemIndexes = ArrayLike<number>;

export type ReportUnit =
  | { readonly kind: 'register'; readonly indexes: ItemIndexes; readonly mediums: readonly string[] }
  | { readonly kind: 'heartbeat' | 'host_down'; readonly indexes: ItemIndexes }
  | { readonly kind: 'delta'; readonly indexes: ItemIndexes; readonly work: DeltaWork }
  | { readonly kind: 'snapshot'; readonly indexes: ItemIndexes; readonly work: SnapshotWork };

export interface ReportPlan {
  /** §7.3: false = the whole request is INVALID_ARGUMENT (units and invalid are then empty). */
  readonly shapeOk: boolean;
  readonly eventCount: number;
  /** §7.4: indexes of invalid items (INVALID_ARGUMENT, skipped), ascending. */
  readonly invalid: ItemIndexes;
  readonly units: readonly ReportUnit[];
}

/** §7.2 steps 3–5 over decoded events. Invalid items are skipped and do not break a run. */
export function planReport(events: readonly DecodedEvent[], maxEventsPerRequest: number): ReportPlan {
  if (!isAllowedShape(events, maxEventsPerRequest)) return { shapeOk: false, eventCount: events.length, invalid: [], units: [] };
  const units: ReportUnit[] = [];
  const invalid: number[] = [];
  let register: { indexes: number[]; mediums: string[]; seen: Set<string> } | null = null;
  let delta: { indexes: number[]; events: DeltaEvent[] } | null = null;
  for (let i = 0; i < events.length; i++) {
    const v = validateEvent(events[i] as DecodedEvent);
    if (v === null) {
      invalid.push(i);
      continue;
    }
    if (v.kind === 'add' || v.kind === 'delete') {
      if (!delta) {
        delta = { indexes: [], events: [] };
        units.push({ kind: 'delta', indexes: delta.indexes, work: { kind: 'inline', events: delta.events } });
      }
      delta.indexes.push(i);
      delta.events.push(v);
      continue;
    }
    delta = null;
    switch (v.kind) {
      case 'register':
        if (!register) {
          register = { indexes: [], mediums: [], seen: new Set() };
          units.push({ kind: 'register', indexes: register.indexes, mediums: register.mediums });
        }
        register.indexes.push(i);
        for (const m of v.mediums) {
          if (register.seen.has(m)) continue;
          register.seen.add(m);
          register.mediums.push(m);
        }
        break;
      case 'snapshot':
        units.push({ kind: 'snapshot', indexes: [i], work: { kind: 'inline', blocks: v.blocks } });
        break;
      case 'heartbeat':
      case 'host_down':
        units.push({ kind: v.kind, indexes: [i] });
        break;
    }
  }
  return { shapeOk: true, eventCount: events.length, invalid, units };
}
