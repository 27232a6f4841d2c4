/**
 * What one stream tells the rest of the directory, pushed by its subscriber in the order things
 * happen (architecture.md "The view stream", kv-events §7): one typed observer per stream, the
 * only channel out of a subscriber. Nobody reads a stream back to find out what changed; each
 * event carries what a listener needs (sequence, block counts, the exported residency).
 *
 * Order guarantees, which the view relies on:
 * - `stateChanged` comes first on `observe` (the state the stream is in) and on every §7 move.
 * - Entering SYNCHRONIZED, `stateChanged` is followed at once by `indexReplaced`; a swap while
 *   SYNCHRONIZED (a reconciliation that found loss) is an `indexReplaced` alone.
 * - `residencyChanged` reports only the served index, only while SYNCHRONIZED, one key at a time;
 *   the batch it belongs to ends with `batchApplied`. Changes an index makes before it is served
 *   (a recovery building F, a reconciliation candidate) are never reported: `indexReplaced`
 *   carries them whole.
 * - `streamClosed` is the last call.
 */
import type { GroupSlot } from '../../shared/index/residency-groups.js';
import type { StreamState } from './stream-state.js';

/** A stream's whole residency: N 16-byte content keys (§4 byte order) and their N tier bytes. */
export interface ExportedResidency {
  readonly keys: Uint8Array;
  readonly tiers: Uint8Array;
}

/**
 * The index a stream now serves, as far as a listener may look at it: its block counts and its
 * slot in the shared group index (the directory's query view), which mirrors its residency key
 * for key. A view snapshot reads that slot, never the stream's own index.
 */
export interface ServedIndex extends GroupSlot {
  readonly deviceBlocks: number;
  readonly hostBlocks: number;
}

/** Outcome of one §7.5 check: 'replaced' = silent loss found, 'lost' = not reached, 'abandoned' = reconcile_failures, 'failed' = the reply's error moved the stream out of SYNCHRONIZED. */
export type ReconcileOutcome = 'equal' | 'replaced' | 'lost' | 'abandoned' | 'failed';

export interface StreamObserver {
  /**
   * Hot path, one call per residency change of the served index: the content key at
   * `keyWords[keyOffset .. keyOffset+4)` went from `oldTiers` to `newTiers` (0 = gone). The
   * array is the index's own storage: copy what you keep before returning.
   */
  residencyChanged(keyWords: Uint32Array, keyOffset: number, oldTiers: number, newTiers: number): void;
  /** One live batch applied in place; `sequence` is the stream's new `last`. */
  batchApplied(sequence: bigint, deviceBlocks: number, hostBlocks: number): void;
  /** Another index is served (recovery, restore, reconciliation swap), whole residency attached. */
  indexReplaced(sequence: bigint, served: ServedIndex, residency: ExportedResidency): void;
  /** A §7 move (or, on `observe`, the current state); any state but SYNCHRONIZED serves nothing. */
  stateChanged(state: StreamState, error: string, sequence: bigint): void;
  /** A §7.4 delay was chosen. */
  backoffChosen(delayMs: number, failures: number): void;
  /** A §7.5 check ended. */
  reconcileEnded(outcome: ReconcileOutcome): void;
  /** The stream is closing: no call follows. */
  streamClosed(): void;
}

/** One party's interest in a stream: any subset of the events. */
export type StreamListener = Partial<StreamObserver>;

/**
 * The fan-out of one stream to every party told about it, in the order given. Each event has its
 * own precomputed list of the parties that listen to it, so the hot path calls only those.
 */
export class StreamObservers implements StreamObserver {
  private readonly residency: Array<Pick<StreamObserver, 'residencyChanged'>>;
  private readonly batches: Array<Pick<StreamObserver, 'batchApplied'>>;
  private readonly replaced: Array<Pick<StreamObserver, 'indexReplaced'>>;
  private readonly states: Array<Pick<StreamObserver, 'stateChanged'>>;
  private readonly backoffs: Array<Pick<StreamObserver, 'backoffChosen'>>;
  private readonly reconciles: Array<Pick<StreamObserver, 'reconcileEnded'>>;
  private readonly closes: Array<Pick<StreamObserver, 'streamClosed'>>;

  constructor(parts: readonly StreamListener[]) {
    const having = <K extends keyof StreamObserver>(k: K) => parts.filter((p): p is Pick<StreamObserver, K> => p[k] !== undefined);
    this.residency = having('residencyChanged');
    this.batches = having('batchApplied');
    this.replaced = having('indexReplaced');
    this.states = having('stateChanged');
    this.backoffs = having('backoffChosen');
    this.reconciles = having('reconcileEnded');
    this.closes = having('streamClosed');
  }

  residencyChanged(keyWords: Uint32Array, keyOffset: number, oldTiers: number, newTiers: number): void {
    const all = this.residency;
    for (let i = 0; i < all.length; i++) all[i]!.residencyChanged(keyWords, keyOffset, oldTiers, newTiers);
  }

  batchApplied(sequence: bigint, deviceBlocks: number, hostBlocks: number): void {
    for (const p of this.batches) p.batchApplied(sequence, deviceBlocks, hostBlocks);
  }

  indexReplaced(sequence: bigint, served: ServedIndex, residency: ExportedResidency): void {
    for (const p of this.replaced) p.indexReplaced(sequence, served, residency);
  }

  stateChanged(state: StreamState, error: string, sequence: bigint): void {
    for (const p of this.states) p.stateChanged(state, error, sequence);
  }

  backoffChosen(delayMs: number, failures: number): void {
    for (const p of this.backoffs) p.backoffChosen(delayMs, failures);
  }

  reconcileEnded(outcome: ReconcileOutcome): void {
    for (const p of this.reconciles) p.reconcileEnded(outcome);
  }

  streamClosed(): void {
    for (const p of this.closes) p.streamClosed();
  }
}

/** A stream nobody listens to (before `observe`, and after close). */
export const UNOBSERVED: StreamObserver = new StreamObservers([]);
