/**
 * What the TTFT policy tracks per engine between load reports (ttft-policy.ts), from the prefill
 * ledgers: how far the engine has got with the requests queued there, and which of the requests a
 * load report counts the ledgers account for.
 *
 * - The head: the oldest request in the ledgers, the one a FIFO engine prefills now. This router's
 *   own ledger knows when each of its entries was sent and when its last first token came back
 *   (prefill-ledger.ts). The other replicas' ledgers come as totals through the view, so for them
 *   it takes the time it first saw their count rise from 0 as the head's start and the time it saw
 *   the count fall as a first token, and their mean as the head's size: both times are late by
 *   the view's delay, so the engine is credited with less progress than it made, never more.
 * - ledgerAtReport: a load report made at t counts this router's entries at the engine then
 *   (PrefillLedger.liveAt: answered since or not) and the other replicas' as this router first
 *   saw them with that report; the rest of its count is traffic no router here accounts for.
 *
 * Times are the policy's monotonic ms. O(1) per candidate, and liveAt once per load report.
 */
import type { PrefillLedger } from '../inflight/prefill-ledger.js';
import { workedOffTokens } from './ttft-cost.js';

export class EngineProgress {
  /** The load report (its reported_at_ms) ledgerAtReport belongs to. */
  private stamp = Number.NaN;
  ledgerAtReport = 0;
  /** The other replicas' ledger count last seen, since when it has been > 0, and when it last fell. */
  private othersRequests = 0;
  private othersSinceMs = Number.POSITIVE_INFINITY;
  private othersEndMs = Number.NEGATIVE_INFINITY;

  /** One look at the engine at `nowMs`: the ledgers now, and its load report made at `reportMs`. */
  see(nowMs: number, ledger: PrefillLedger | null, othersRequests: number, reportStamp: number, reportMs: number): this {
    if (othersRequests < this.othersRequests) this.othersEndMs = nowMs;
    if (othersRequests > 0 && this.othersRequests === 0) this.othersSinceMs = nowMs;
    if (othersRequests === 0) this.othersSinceMs = Number.POSITIVE_INFINITY;
    this.othersRequests = othersRequests;
    if (reportStamp !== this.stamp) {
      this.stamp = reportStamp;
      this.ledgerAtReport = (ledger === null ? 0 : ledger.liveAt(reportMs)) + othersRequests;
    }
    return this;
  }

  /**
   * Tokens the engine has prefilled of the head of the ledgers (workedOffTokens): busy with it
   * since it was sent or since the last first token, whichever is later, at `tokensPerMs`.
   */
  workedOff(ledger: PrefillLedger | null, othersTokens: number, othersRequests: number, nowMs: number, tokensPerMs: number): number {
    let headStart = Number.POSITIVE_INFINITY;
    let headTokens = 0;
    if (ledger !== null && ledger.requests > 0) {
      headStart = ledger.headStartMs;
      headTokens = ledger.headTokens;
    }
    if (othersRequests > 0 && this.othersSinceMs < headStart) {
      headStart = this.othersSinceMs;
      headTokens = othersTokens / othersRequests;
    }
    if (headStart === Number.POSITIVE_INFINITY) return 0;
    const lastEnd = Math.max(ledger === null ? Number.NEGATIVE_INFINITY : ledger.lastEndMs, this.othersEndMs);
    return workedOffTokens(headTokens, nowMs - Math.max(headStart, lastEnd), tokensPerMs);
  }
}

/** EngineProgress per engine name. */
export class QueueProgress {
  private readonly engines = new Map<string, EngineProgress>();

  see(name: string, nowMs: number, ledger: PrefillLedger | null, othersRequests: number, reportStamp: number, reportMs: number): EngineProgress {
    let e = this.engines.get(name);
    if (e === undefined) this.engines.set(name, (e = new EngineProgress()));
    return e.see(nowMs, ledger, othersRequests, reportStamp, reportMs);
  }

  /** Drops the engines not in `names`. */
  retainOnly(names: ReadonlySet<string>): void {
    for (const name of this.engines.keys()) if (!names.has(name)) this.engines.delete(name);
  }
}
