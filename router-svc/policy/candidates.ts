/**
 * routing.md "Candidates": which instances may take a request, on which side, and their queue
 * costs. Built once per instance revision of the view (load reports are instance upserts) and
 * reused by every decision until the next one.
 */
import type { RouterInstance, ViewCache } from '../viewcache/view-cache.js';
import { NoCandidateError } from './no-candidate-error.js';

export interface CandidateSet {
  /** P side, sorted by name. */
  readonly prefill: readonly RouterInstance[];
  readonly prefillNames: readonly string[];
  /** waiting / max waiting over P (0 when that max is 0). */
  readonly prefillQueueCost: Float64Array;
  /** D side, sorted by name; empty when there is none (then P holds DEFAULT only). */
  readonly decode: readonly RouterInstance[];
  readonly decodeNames: readonly string[];
  /** waiting / max waiting over D (0 when that max is 0). */
  readonly decodeQueueCost: Float64Array;
}

/** Schedulable (ACTIVE or LEASE_LOST), not SUSPECT, with a valid load report. */
export function isCandidate(inst: RouterInstance): boolean {
  return inst.schedulable && inst.state !== 'SUSPECT' && inst.load !== null;
}

/** PREFILL, DEFAULT, and MIX currently acting as PREFILL. */
export function isPrefillSide(inst: RouterInstance): boolean {
  return inst.type === 'PREFILL' || inst.type === 'DEFAULT' || (inst.type === 'MIX' && inst.currentRole !== 'DECODE');
}

/** DECODE, and MIX currently acting as DECODE. */
export function isDecodeSide(inst: RouterInstance): boolean {
  return inst.type === 'DECODE' || (inst.type === 'MIX' && inst.currentRole === 'DECODE');
}

function queueCosts(side: readonly RouterInstance[]): Float64Array {
  const out = new Float64Array(side.length);
  let max = 0;
  for (const inst of side) max = Math.max(max, inst.load!.waitingRequestsNum);
  if (max === 0) return out;
  for (let i = 0; i < side.length; i++) out[i] = side[i]!.load!.waitingRequestsNum / max;
  return out;
}

/** The candidate sets of `instances` (sorted by name); throws NoCandidateError with the reason. */
export function selectCandidates(instances: readonly RouterInstance[]): CandidateSet {
  const prefill: RouterInstance[] = [];
  const decode: RouterInstance[] = [];
  for (const inst of instances) {
    if (!isCandidate(inst)) continue;
    if (isDecodeSide(inst)) decode.push(inst);
    else if (isPrefillSide(inst)) prefill.push(inst);
  }
  if (prefill.length + decode.length === 0) {
    throw new NoCandidateError(
      instances.length === 0
        ? 'no instance in the directory view'
        : `none of ${instances.length} instances is schedulable (ACTIVE or LEASE_LOST, not SUSPECT) with a valid load report`,
    );
  }
  // With no D candidate only DEFAULT instances can serve alone.
  const p = decode.length === 0 ? prefill.filter((i) => i.type === 'DEFAULT') : prefill;
  if (p.length === 0) {
    throw new NoCandidateError(
      decode.length === 0
        ? `no decode candidate and no DEFAULT instance to serve alone (prefill-only candidates: ${prefill.map((i) => i.name).join(', ')})`
        : `no prefill candidate (PREFILL, DEFAULT or MIX acting as PREFILL); decode candidates: ${decode.map((i) => i.name).join(', ')}`,
    );
  }
  return {
    prefill: p,
    prefillNames: p.map((i) => i.name),
    prefillQueueCost: queueCosts(p),
    decode,
    decodeNames: decode.map((i) => i.name),
    decodeQueueCost: queueCosts(decode),
  };
}

/** Caches the candidate set of a view by its instance revision (one rebuild per load change). */
export class CandidateCache {
  private view: ViewCache | null = null;
  private revision = -1;
  private set: CandidateSet | null = null;
  private error: NoCandidateError | null = null;

  of(view: ViewCache): CandidateSet {
    if (view !== this.view || view.instancesRevision !== this.revision) {
      this.view = view;
      this.revision = view.instancesRevision;
      try {
        this.set = selectCandidates(view.instances());
        this.error = null;
      } catch (e) {
        if (!(e instanceof NoCandidateError)) throw e;
        this.set = null;
        this.error = e;
      }
    }
    if (this.error !== null) throw new NoCandidateError(this.error.reason);
    return this.set!;
  }
}
