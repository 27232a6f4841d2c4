/**
 * routing.md "Candidates": which instances may take a request, on which side, and their queue
 * costs — restricted first to the request's model (cache-identity §2, request-identity.ts scopes).
 * Built once per (scope, instance revision of the view) (load reports are instance upserts) and
 * reused by every decision of that scope until the next revision. Each scope also keeps its P and
 * D rotation cursors (routing.md "Ties", RR's turn), so equal instances of one model share that
 * model's load whatever the other models' traffic does.
 */
import { ANY_IDENTITY, ANY_SCOPE, inScope, UNLISTED_SCOPE, type RequestIdentity } from '../identity/request-identity.js';
import type { RouterInstance, ViewCache } from '../viewcache/view-cache.js';
import { NoCandidateError } from './no-candidate-error.js';
import { newRotationCursor, type RotationCursor } from './pick-minimum.js';

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
  /** This scope's P-side rotation (kept across view revisions; the policy that owns the cache moves it). */
  readonly prefillCursor: RotationCursor;
  /** This scope's D-side rotation. */
  readonly decodeCursor: RotationCursor;
}

/** The instances a candidate set is chosen from, its scope's cursors, and what to call it in a 503. */
interface ScopeInput {
  readonly instances: readonly RouterInstance[];
  /** What the scope's 503 calls it (scopeLabel); null for any model. */
  readonly label: string | null;
  readonly prefillCursor: RotationCursor;
  readonly decodeCursor: RotationCursor;
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

/**
 * The candidate sets of `scope.instances` (sorted by name, already in the request's model scope);
 * throws NoCandidateError with the reason.
 */
function selectCandidates(scope: ScopeInput): CandidateSet {
  const instances = scope.instances;
  const serving = scope.label === null ? '' : ` serving ${scope.label}`;
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
        ? `no instance${serving} in the directory view`
        : `none of ${instances.length} instances${serving} is schedulable (ACTIVE or LEASE_LOST, not SUSPECT) with a valid load report`,
    );
  }
  // With no D candidate only DEFAULT instances can serve alone.
  const p = decode.length === 0 ? prefill.filter((i) => i.type === 'DEFAULT') : prefill;
  if (p.length === 0) {
    throw new NoCandidateError(
      decode.length === 0
        ? `no decode candidate${serving} and no DEFAULT instance to serve alone (prefill-only candidates: ${prefill.map((i) => i.name).join(', ')})`
        : `no prefill candidate${serving} (PREFILL, DEFAULT or MIX acting as PREFILL); decode candidates: ${decode.map((i) => i.name).join(', ')}`,
    );
  }
  return {
    prefill: p,
    prefillNames: p.map((i) => i.name),
    prefillQueueCost: queueCosts(p),
    decode,
    decodeNames: decode.map((i) => i.name),
    decodeQueueCost: queueCosts(decode),
    prefillCursor: scope.prefillCursor,
    decodeCursor: scope.decodeCursor,
  };
}

/**
 * What a 503 calls the scope: the model, or for the unlisted scope (shared by every name no list
 * names, so its cached reason must not name one of them) what may serve it.
 */
function scopeLabel(identity: RequestIdentity): string | null {
  if (identity.scope === ANY_SCOPE) return null;
  if (identity.scope === UNLISTED_SCOPE) return 'a model no list names (only instances with an unknown list)';
  return `model \`${identity.model}\``;
}

/** One scope's cached set (or the reason it has none) and its cursors. */
interface ScopeEntry {
  revision: number;
  set: CandidateSet | null;
  error: NoCandidateError | null;
  readonly prefillCursor: RotationCursor;
  readonly decodeCursor: RotationCursor;
}

/**
 * Scopes kept per policy before they are all dropped (cursors restart): a scope exists per model
 * the view lists (plus any and unlisted), so only a fleet loading thousands of adapters over time
 * gets here.
 */
const MAX_SCOPES = 1024;

/**
 * A policy's candidate sets, one per model scope, each rebuilt when the view's instance revision
 * changes (one rebuild per scope per load change, on the first decision after it). Holds the
 * scopes' rotation cursors, so each policy instance owns one.
 */
export class CandidateCache {
  private view: ViewCache | null = null;
  private readonly scopes = new Map<string, ScopeEntry>();

  /** `rotationStart`: where each scope's first rotation starts (pick-minimum.ts rotationOffset); 0 = the first name. */
  constructor(private readonly rotationStart = 0) {}

  /**
   * The candidates of `identity`'s scope in `view` (undefined: ANY_IDENTITY, a request without
   * identity fields); throws NoCandidateError (503) naming why there are none. `identity` is
   * required on purpose: a policy passes its request's (`req.identity`), never forgets it.
   */
  of(view: ViewCache, requestIdentity: RequestIdentity | undefined): CandidateSet {
    const identity = requestIdentity ?? ANY_IDENTITY;
    if (view !== this.view) {
      this.view = view;
      this.scopes.clear();
    }
    let e = this.scopes.get(identity.scope);
    if (e === undefined) {
      if (this.scopes.size >= MAX_SCOPES) this.scopes.clear();
      e = { revision: -1, set: null, error: null, prefillCursor: newRotationCursor(this.rotationStart), decodeCursor: newRotationCursor(this.rotationStart) };
      this.scopes.set(identity.scope, e);
    }
    if (e.revision !== view.instancesRevision) {
      e.revision = view.instancesRevision;
      const all = view.instances();
      const instances = identity.model === null ? all : all.filter((i) => inScope(i, identity));
      try {
        e.set = selectCandidates({ instances, label: scopeLabel(identity), prefillCursor: e.prefillCursor, decodeCursor: e.decodeCursor });
        e.error = null;
      } catch (err) {
        if (!(err instanceof NoCandidateError)) throw err;
        e.set = null;
        e.error = err;
      }
    }
    if (e.error !== null) throw new NoCandidateError(e.error.reason);
    return e.set!;
  }
}
