/**
 * What the TTFT policy tracks per engine between load reports (ttft-policy.ts), from the prefill
 * ledgers: how far the engine has got with the requests queued there, and which of the requests a
 * load report counts the ledgers account for.
 *
 * - The head: the oldest request in every replica's ledger, the one a FIFO engine prefills now.
 *   Each ledger says when its oldest entry was sent and when its last first token came back
 *   (prefill-ledger.ts): this router's directly, the other replicas' through the view as ages
 *   (InflightShare.headStartMs, lastEndMs). The engine has been busy with the union's head since
 *   the later of its send and the newest of those first tokens. A replica that sends no head (an
 *   older router) is read as before: the head starts when this router first saw its count rise
 *   from 0, a fall is a first token, its mean is the head's size — all seen late, so the engine
 *   is credited with less progress than it made, never more.
 * - ledgerAtReport: a load report made at t counts this router's entries at the engine then
 *   (PrefillLedger.liveAt: answered since or not) and the other replicas' as this router first
 *   saw them with that report, plus one for each replica whose last first token there came after
 *   t (it answered at least one request the report counted, gone from its ledger since); the rest
 *   of its count is traffic no router here accounts for.
 *
 * Times are the policy's monotonic ms. O(replicas) per candidate, and liveAt once per load report.
 */
import type { PrefillLedger } from '../inflight/prefill-ledger.js';
import type { InflightShare } from '../viewcache/view-update.js';
import { workedOffTokens } from './ttft-cost.js';

export class EngineProgress {
  /** The load report (its reported_at_ms) ledgerAtReport belongs to. */
  private stamp = Number.NaN;
  ledgerAtReport = 0;
  /** The other replicas' requests in ledgers without a head, as last seen; since when > 0, and when it last fell. */
  private unheaded = 0;
  private unheadedSinceMs = Number.POSITIVE_INFINITY;
  private unheadedEndMs = Number.NEGATIVE_INFINITY;

  /**
   * One look at the engine at `nowMs`: this router's ledger, the other replicas' `shares` (those
   * of `routerId` skipped) and their requests, and its load report `reportStamp` made at `reportMs`.
   */
  see(nowMs: number, ledger: PrefillLedger | null, shares: readonly InflightShare[], routerId: string, othersRequests: number, reportStamp: number, reportMs: number): this {
    const unheaded = unheadedRequests(shares, routerId);
    if (unheaded < this.unheaded) this.unheadedEndMs = nowMs;
    if (unheaded > 0 && this.unheaded === 0) this.unheadedSinceMs = nowMs;
    if (unheaded === 0) this.unheadedSinceMs = Number.POSITIVE_INFINITY;
    this.unheaded = unheaded;
    if (reportStamp !== this.stamp) {
      this.stamp = reportStamp;
      let answeredSince = 0;
      for (let i = 0; i < shares.length; i++) if (shares[i]!.routerId !== routerId && shares[i]!.lastEndMs > reportMs) answeredSince++;
      this.ledgerAtReport = (ledger === null ? 0 : ledger.liveAt(reportMs)) + othersRequests + answeredSince;
    }
    return this;
  }

  /**
   * Tokens the engine has prefilled of the head of the ledgers (workedOffTokens) by `nowMs`: this
   * router's `ledger`, the other replicas' `shares` (those of `routerId` skipped; none when the
   * view is stale), at `tokensPerMs`.
   */
  workedOff(ledger: PrefillLedger | null, shares: readonly InflightShare[], routerId: string, nowMs: number, tokensPerMs: number): number {
    let headStart = Number.POSITIVE_INFINITY;
    let headTokens = 0;
    let lastEnd = Number.NEGATIVE_INFINITY;
    if (ledger !== null && ledger.requests > 0) {
      headStart = ledger.headStartMs;
      headTokens = ledger.headTokens;
    }
    if (ledger !== null) lastEnd = ledger.lastEndMs;
    let unheadedTokens = 0;
    for (let i = 0; i < shares.length; i++) {
      const s = shares[i]!;
      if (s.routerId === routerId) continue;
      // A replica with nothing left there still says when the engine last finished one of its requests.
      if (s.lastEndMs > lastEnd) lastEnd = s.lastEndMs;
      if (s.outstandingRequests === 0) continue;
      if (s.headTokens === 0) {
        unheadedTokens += s.outstandingTokens;
        continue;
      }
      if (s.headStartMs < headStart) {
        headStart = s.headStartMs;
        headTokens = s.headTokens;
      }
    }
    if (this.unheaded > 0) {
      if (this.unheadedSinceMs < headStart) {
        headStart = this.unheadedSinceMs;
        headTokens = unheadedTokens / this.unheaded;
      }
      if (this.unheadedEndMs > lastEnd) lastEnd = this.unheadedEndMs;
    }
    if (headStart === Number.POSITIVE_INFINITY) return 0;
    return workedOffTokens(headTokens, nowMs - Math.max(headStart, lastEnd), tokensPerMs);
  }
}

/** The other replicas' requests in ledgers that carry no head (older routers), from `shares` (those of `routerId` skipped). */
export function unheadedRequests(shares: readonly InflightShare[], routerId: string): number {
  let n = 0;
  for (let i = 0; i < shares.length; i++) {
    const s = shares[i]!;
    if (s.routerId !== routerId && s.headTokens === 0) n += s.outstandingRequests;
  }
  return n;
}

/** EngineProgress per engine name. */
export class QueueProgress {
  private readonly engines = new Map<string, EngineProgress>();

  see(
    name: string,
    nowMs: number,
    ledger: PrefillLedger | null,
    shares: readonly InflightShare[],
    routerId: string,
    othersRequests: number,
    reportStamp: number,
    reportMs: number,
  ): EngineProgress {
    let e = this.engines.get(name);
    if (e === undefined) this.engines.set(name, (e = new EngineProgress()));
    return e.see(nowMs, ledger, shares, routerId, othersRequests, reportStamp, reportMs);
  }

  /** Drops the engines not in `names`. */
  retainOnly(names: ReadonlySet<string>): void {
    for (const name of this.engines.keys()) if (!names.has(name)) this.engines.delete(name);
  }
}
