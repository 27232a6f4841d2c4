/**
 * One instance's prefill ledger (routing by predicted TTFT, issue 27): this router's proxied
 * requests to the instance whose first token has not come back yet, each with its prefill tokens,
 * its prompt's fingerprints and when it was sent; and the gauge the other replicas see of it.
 *
 * Beyond the totals, the ledger keeps the times that say how far the engine has got with them:
 *
 * - `headStartMs` / `headTokens`: the oldest entry. An engine prefills its queue in arrival order,
 *   so the oldest entry is the one it works on (or the first it will);
 * - `lastEndMs`: the last first token seen here. Since max(head start, last end) the engine has
 *   been working on that head, and the TTFT policy takes what it has worked off from the queue
 *   rather than count a nearly finished prompt at its full size;
 * - `liveAt(t)`: how many entries were at the engine at time t (sent by then, first token not seen
 *   by then), from the entries ended in the last `keepEndedMs` too: what a load report made at t
 *   can count of this router's requests, so the rest of its count is somebody else's.
 *
 * Times are the caller's monotonic ms. Entries leave in about the order they came (first tokens of
 * a FIFO engine), so the ended ring is pruned from its head. Allocation: the two Maps' entries per
 * request; the ended ring grows to the burst it holds and is reused.
 */
import { NO_LAST_END, type WireOutstandingPrefill } from '../../shared/view/view-wire.js';
import { fingerprintBytes, longerShared, PENDING_PROMPTS_PER_SHARE } from '../../shared/keys/prompt-fingerprint.js';

/** How long an ended entry is kept for `liveAt` (a load report older than this is not trusted). */
export const LEDGER_KEEP_ENDED_MS = 2000;

export class PrefillLedger {
  /** Outstanding entries by id: prefill tokens, and when each was sent (insertion order = send order). */
  private readonly tokensOf = new Map<number, number>();
  private readonly startOf = new Map<number, number>();
  /** The entries' prompt fingerprints (those that have them), for pending prefix credit. */
  private readonly prompts = new Map<number, Uint32Array>();
  /** The same as the wire carries them (the gauge's newest 8), encoded once per entry. */
  private readonly promptBytes = new Map<number, Buffer>();
  private total = 0;
  /** The last first token (or answer) seen; −∞ before any. */
  lastEndMs = Number.NEGATIVE_INFINITY;
  /** Ended entries kept for liveAt: their send and end times, a ring from `endedHead`. */
  private endedStart = new Float64Array(16);
  private endedEnd = new Float64Array(16);
  private endedHead = 0;
  private endedSize = 0;
  /** The gauge as last sent, and whether the totals changed since. */
  private dirty = false;
  private sentRequests = 0;
  private sentTokens = 0;
  private sentHeadMs = Number.POSITIVE_INFINITY;

  constructor(private readonly keepEndedMs: number = LEDGER_KEEP_ENDED_MS) {}

  /** Outstanding requests and their prefill tokens. */
  get requests(): number {
    return this.tokensOf.size;
  }

  get tokens(): number {
    return this.total;
  }

  /** Entry `id` with `tokens` of prefill (≥ 0), sent at `atMs`. */
  start(id: number, tokens: number, prompt: Uint32Array | null, atMs: number): void {
    this.tokensOf.set(id, tokens);
    this.startOf.set(id, atMs);
    if (prompt !== null && prompt.length > 0) {
      this.prompts.set(id, prompt);
      this.promptBytes.set(id, fingerprintBytes(prompt));
    }
    this.total += tokens;
    this.dirty = true;
  }

  /** Entry `id` is over at `atMs` (its first token or its answer); false when it was not outstanding. */
  end(id: number, atMs: number): boolean {
    const tokens = this.tokensOf.get(id);
    if (tokens === undefined) return false;
    const startMs = this.startOf.get(id)!;
    this.tokensOf.delete(id);
    this.startOf.delete(id);
    this.prompts.delete(id);
    this.promptBytes.delete(id);
    this.total = this.tokensOf.size === 0 ? 0 : this.total - tokens;
    this.dirty = true;
    if (atMs > this.lastEndMs) this.lastEndMs = atMs;
    this.pruneEnded(atMs);
    this.pushEnded(startMs, atMs);
    return true;
  }

  /** When the oldest outstanding entry was sent; +∞ when none is. */
  get headStartMs(): number {
    for (const at of this.startOf.values()) return at;
    return Number.POSITIVE_INFINITY;
  }

  /** The oldest outstanding entry's prefill tokens; 0 when none is. */
  get headTokens(): number {
    for (const t of this.tokensOf.values()) return t;
    return 0;
  }

  /**
   * Entries at the engine at `atMs`: sent at or before it, their end not seen before it. Exact for
   * a time within `keepEndedMs` of the newest end; older ends are forgotten (counted as ended).
   */
  liveAt(atMs: number): number {
    let n = 0;
    for (const s of this.startOf.values()) if (s <= atMs) n++;
    const mask = this.endedStart.length - 1;
    for (let k = 0; k < this.endedSize; k++) {
      const i = (this.endedHead + k) & mask;
      if (this.endedStart[i]! <= atMs && this.endedEnd[i]! > atMs) n++;
    }
    return n;
  }

  /**
   * The longest prefix, in granules, `prompt` shares with an outstanding entry (sent before
   * `beforeMs`), at least `best`.
   */
  pendingGranules(prompt: Uint32Array, best: number, beforeMs: number = Number.POSITIVE_INFINITY): number {
    // The decision path (no claim bound) reads the values alone: no entry pairs, no lookups.
    if (beforeMs === Number.POSITIVE_INFINITY) {
      for (const p of this.prompts.values()) best = longerShared(prompt, p, best);
      return best;
    }
    for (const [id, p] of this.prompts) if (this.startOf.get(id)! < beforeMs) best = longerShared(prompt, p, best);
    return best;
  }

  /** Appends the outstanding entries' prompt fingerprints (those that have them) to `out` from `at`; returns the new length. */
  collectPrompts(out: Uint32Array[], at: number): number {
    for (const p of this.prompts.values()) out[at++] = p;
    return at;
  }

  /** Outstanding entries sent before `beforeMs` (a claim's re-decision counts only those: claim-order.ts). */
  requestsBefore(beforeMs: number): number {
    let n = 0;
    for (const s of this.startOf.values()) if (s < beforeMs) n++;
    return n;
  }

  /** Their prefill tokens. */
  tokensBefore(beforeMs: number): number {
    let sum = 0;
    for (const [id, s] of this.startOf) if (s < beforeMs) sum += this.tokensOf.get(id)!;
    return sum;
  }

  /**
   * The gauge for the directory at `nowMs` when it changed since it was last sent (a change that
   * came back to the sent totals and head is none), marked sent; null otherwise. It carries the
   * head and the last end as ages, so no clocks need to agree.
   */
  takeChange(nowMs: number): WireOutstandingPrefill | null {
    if (!this.dirty) return null;
    this.dirty = false;
    const head = this.headStartMs;
    if (this.tokensOf.size === this.sentRequests && this.total === this.sentTokens && head === this.sentHeadMs) return null;
    this.sentRequests = this.tokensOf.size;
    this.sentTokens = this.total;
    this.sentHeadMs = head;
    const gauge: WireOutstandingPrefill = { tokens: String(Math.round(this.total)), requests: this.tokensOf.size };
    // With no request left the last first token still goes: the engine's next head started then.
    gauge.last_end_age_ms = this.lastEndMs === Number.NEGATIVE_INFINITY ? NO_LAST_END : wireAge(nowMs - this.lastEndMs);
    if (this.tokensOf.size > 0) {
      gauge.head_tokens = String(Math.round(this.headTokens));
      gauge.head_age_ms = wireAge(nowMs - head);
      this.addNewestPrompts(gauge);
    }
    return gauge;
  }

  /**
   * The newest PENDING_PROMPTS_PER_SHARE entries' fingerprints, oldest first (as the wire carries
   * them), and each one's prefill tokens: a replica deciding a claim in order takes out exactly
   * those ordered after it.
   */
  private addNewestPrompts(gauge: WireOutstandingPrefill): void {
    if (this.promptBytes.size === 0) return;
    const skip = this.promptBytes.size - PENDING_PROMPTS_PER_SHARE;
    const prompts: Buffer[] = [];
    const tokens: number[] = [];
    let i = 0;
    for (const [id, b] of this.promptBytes) {
      if (i++ < skip) continue;
      prompts.push(b);
      tokens.push(Math.round(this.tokensOf.get(id)!));
    }
    gauge.prompts = prompts;
    gauge.prompt_tokens = tokens;
  }

  private pruneEnded(nowMs: number): void {
    const mask = this.endedStart.length - 1;
    while (this.endedSize > 0 && nowMs - this.endedEnd[this.endedHead]! > this.keepEndedMs) {
      this.endedHead = (this.endedHead + 1) & mask;
      this.endedSize--;
    }
  }

  private pushEnded(startMs: number, endMs: number): void {
    if (this.endedSize === this.endedStart.length) this.growEnded();
    const i = (this.endedHead + this.endedSize) & (this.endedStart.length - 1);
    this.endedStart[i] = startMs;
    this.endedEnd[i] = endMs;
    this.endedSize++;
  }

  private growEnded(): void {
    const n = this.endedStart.length * 2;
    const start = new Float64Array(n);
    const end = new Float64Array(n);
    const mask = this.endedStart.length - 1;
    for (let k = 0; k < this.endedSize; k++) {
      start[k] = this.endedStart[(this.endedHead + k) & mask]!;
      end[k] = this.endedEnd[(this.endedHead + k) & mask]!;
    }
    this.endedStart = start;
    this.endedEnd = end;
    this.endedHead = 0;
  }
}

/** An age in whole ms for the wire: ≥ 0, below NO_LAST_END. */
export function wireAge(ms: number): number {
  return Math.min(NO_LAST_END - 1, Math.max(0, Math.floor(ms)));
}
