/**
 * In-flight load (routing.md "In-flight load", `--car_inflight_load`): the requests routed to an
 * instance that its latest load report cannot reflect yet.
 *
 *   waiting(instance) = reported waiting + own in-flight + other routers' in-flight
 *
 * - own: this router's decisions, counted at once. One ends when the view delivers a load report
 *   for the instance after the decision (its `reported_at_ms` differs from the one the decision
 *   saw), or INFLIGHT_TTL_MS after it on the monotonic clock, or — for a proxied request, whose
 *   end the router sees — when the engine has answered (`complete`): the engine no longer holds
 *   it, and a repeat of the prompt must not be pushed off the engine that just cached it. Kept
 *   locally even when the directory is gone, so a router that loses the directory still spreads
 *   its own bursts.
 * - other: the view's per-router shares (ViewInstance.inflight), minus this router's own share —
 *   its decisions come back through the view, and the local count is the fresher copy of them.
 *   A stale view gives none: its shares are older than the TTL by then.
 *
 * Also the outbox of the reporter: decisions not yet sent, per instance (drainReport).
 *
 * Hot path: `record` and `own` are O(1) amortized per instance, no allocation once an instance's
 * ring has grown to its burst size (entries are FIFO per instance: both end conditions end the
 * oldest first).
 */
import { performance } from 'node:perf_hooks';
import type { WireInflightDecisions, WireMovedClaim } from '../../shared/view/view-wire.js';
import { NO_SHARES, type InflightShare, type RouterInstance } from '../viewcache/view-update.js';
import { fingerprintBytes, footprints, longerShared, PENDING_PROMPTS_PER_SHARE, sameFingerprints, sharesGranules, type Footprint } from '../../shared/keys/prompt-fingerprint.js';
import { seqBefore } from './claim-seq.js';
import { PrefillLedger } from './prefill-ledger.js';

/** routing.md: an in-flight entry ends 2 s after the decision at the latest. */
export const INFLIGHT_TTL_MS = 2000;

/**
 * One instance's own decisions: a ring of (monotonic time, reported_at_ms seen at decision,
 * answered), entry `k` from the head having sequence number headSeq + k.
 */
class DecisionRing {
  at = new Float64Array(8);
  /** Where the decision stands in this router's arrival order: `at`, or a moved claim's first decision. */
  order = new Float64Array(8);
  seen = new Float64Array(8);
  done = new Uint8Array(8);
  /** The decision's prompt fingerprints (pending prefix credit); null without token ids. */
  prompts: (Uint32Array | null)[] = new Array<Uint32Array | null>(8).fill(null);
  /** The decision's predicted prefill tokens (the TTFT policy's queued work); −1 when not given. */
  tokens = new Float64Array(8);
  /** A claim moved here (claim order): the directory seq it keeps; −1 for a new decision. */
  keptSeqs = new Float64Array(8);
  /** 1 while the decision is an open claim (claim order: it may still move), 0 once settled or not a claim. */
  open = new Uint8Array(8);
  /** How many counted entries are open claims. */
  openCount = 0;
  head = 0;
  size = 0;
  headSeq = 0;
  /** Entries in the ring already answered (not counted). */
  doneCount = 0;
  /** Decisions not reported to the directory yet, and when the newest of them was made. */
  unreported = 0;
  /** Reported decisions answered while still counted, not reported yet. */
  answeredUnreported = 0;
  /** The directory seqs of reported decisions moved elsewhere (claim order), not reported yet. */
  withdrawnUnreported: number[] = [];
  /** The directory seqs of reported open claims that settled here, not reported yet. */
  settledUnreported: number[] = [];
  /** Sequence numbers below this were sent to the directory. */
  reportedBelowSeq = 0;
  /** The load report stamp the latest decision or scoring saw (answers to older decisions are not reported). */
  stamp = -1;
  newestUnreportedAt = 0;
  queued = false;
  /** The prefill ledger: this router's proxied requests to the instance before their first token. */
  readonly ledger = new PrefillLedger();

  constructor(readonly name: string) {}

  /** Appends one decision; returns its sequence number. */
  push(atMs: number, orderMs: number, seenReportMs: number, prompt: Uint32Array | null, prefillTokens: number, keptSeq: number): number {
    if (this.size === this.at.length) this.grow();
    const i = (this.head + this.size) & (this.at.length - 1);
    this.at[i] = atMs;
    this.order[i] = orderMs;
    this.seen[i] = seenReportMs;
    this.done[i] = 0;
    this.prompts[i] = prompt;
    this.tokens[i] = prefillTokens;
    this.keptSeqs[i] = keptSeq;
    this.open[i] = 0;
    this.size++;
    return this.headSeq + this.size - 1;
  }

  /**
   * Marks decision `seq` answered, if it is still counted; true when the directory must hear of
   * it (it was reported already and no newer load report has ended it).
   */
  complete(seq: number): boolean {
    const i = this.end(seq);
    return i >= 0 && this.seen[i] === this.stamp;
  }

  /**
   * Ends decision `seq`, moved to another instance (claim order); true when the directory must
   * hear of it (it was reported; the directory itself knows whether a load report ended it).
   */
  withdraw(seq: number): boolean {
    return this.end(seq) >= 0;
  }

  /** The ring index of decision `seq` while it is counted; −1 when it ended or left the ring. */
  indexOf(seq: number): number {
    const k = seq - this.headSeq;
    if (k < 0 || k >= this.size) return -1;
    const i = (this.head + k) & (this.at.length - 1);
    return this.done[i] === 1 ? -1 : i;
  }

  /** Marks ring index `i` an open claim, or no longer one. */
  setOpen(i: number, open: boolean): void {
    if ((this.open[i] === 1) === open) return;
    this.open[i] = open ? 1 : 0;
    this.openCount += open ? 1 : -1;
  }

  /** Whether a counted decision ordered before `beforeMs` is an open claim. */
  openBefore(beforeMs: number): boolean {
    const mask = this.at.length - 1;
    for (let k = 0; k < this.size; k++) {
      const i = (this.head + k) & mask;
      // An entry that ended is no longer open (end, live): no need to read done.
      if (this.open[i] === 1 && this.order[i]! < beforeMs) return true;
    }
    return false;
  }

  /** Marks decision `seq` ended; its ring index when it was counted and already reported, else −1. */
  private end(seq: number): number {
    const i = this.indexOf(seq);
    if (i < 0) return -1;
    this.done[i] = 1;
    this.doneCount++;
    this.setOpen(i, false);
    if (seq >= this.reportedBelowSeq) {
      // Not sent yet: it never leaves this router.
      this.unreported--;
      return -1;
    }
    return i;
  }

  /** Counted entries (after `live`) decided before `beforeMs`. */
  liveBefore(beforeMs: number): number {
    const mask = this.at.length - 1;
    let n = 0;
    for (let k = 0; k < this.size; k++) {
      const i = (this.head + k) & mask;
      if (this.done[i] === 0 && this.order[i]! < beforeMs) n++;
    }
    return n;
  }

  /** Drops the entries a newer load report, the TTL or an answer ended; returns how many count. */
  live(currentReportMs: number, nowMs: number, ttlMs: number): number {
    this.stamp = currentReportMs;
    const mask = this.at.length - 1;
    while (this.size > 0) {
      const i = this.head;
      const answered = this.done[i] === 1;
      // An open claim is not at the engine yet (claim order holds it): no load report reflects it.
      if (!answered && (this.seen[i] === currentReportMs || this.open[i] === 1) && nowMs - this.at[i]! < ttlMs) break;
      if (answered) this.doneCount--;
      this.setOpen(i, false);
      this.prompts[i] = null;
      this.head = (i + 1) & mask;
      this.size--;
      this.headSeq++;
    }
    return this.size - this.doneCount;
  }

  /**
   * The longest prefix, in granules, `prompt` shares with one of the newest PENDING_PROMPTS_PER_SHARE
   * counted decisions (after `live`) — the same bound the directory puts on what the other
   * replicas see of them.
   */
  pendingGranules(prompt: Uint32Array, best: number, beforeMs: number): number {
    const mask = this.at.length - 1;
    for (let k = this.size - 1, seen = 0; k >= 0 && seen < PENDING_PROMPTS_PER_SHARE; k--) {
      const i = (this.head + k) & mask;
      const p = this.prompts[i];
      if (this.done[i] !== 0 || p === null || p === undefined) continue;
      if (this.order[i]! >= beforeMs) continue;
      seen++;
      best = longerShared(prompt, p, best);
    }
    return best;
  }

  /** Prefill tokens of the counted entries (after `live`) that carry them. */
  liveTokens(beforeMs: number = Number.POSITIVE_INFINITY): number {
    const mask = this.at.length - 1;
    let sum = 0;
    for (let k = 0; k < this.size; k++) {
      const i = (this.head + k) & mask;
      if (this.done[i] === 0 && this.tokens[i]! > 0 && this.order[i]! < beforeMs) sum += this.tokens[i]!;
    }
    return sum;
  }

  /**
   * The prefill tokens of the counted decisions not reported yet, oldest first; null when one of
   * them has none (the directory then counts them all as unknown rather than misplace one).
   */
  unreportedTokens(): number[] | null {
    const mask = this.at.length - 1;
    const out: number[] = [];
    for (let k = Math.max(0, this.reportedBelowSeq - this.headSeq); k < this.size; k++) {
      const i = (this.head + k) & mask;
      if (this.done[i] !== 0) continue;
      const t = this.tokens[i]!;
      if (t < 0) return null;
      out.push(Math.min(0xffffffff, Math.round(t)));
    }
    return out.length === 0 ? null : out;
  }

  /**
   * The fingerprints of the counted decisions not reported yet (those `unreported` counts), oldest
   * first, into `d.prompts`, and the claims among them moved here that keep their seq into
   * `d.moved_claims`; neither set when there are none.
   */
  reportPrompts(d: WireInflightDecisions): void {
    const mask = this.at.length - 1;
    let out: Buffer[] | null = null;
    let moved: WireMovedClaim[] | null = null;
    let open: number[] | null = null;
    for (let k = Math.max(0, this.reportedBelowSeq - this.headSeq); k < this.size; k++) {
      const i = (this.head + k) & mask;
      const p = this.prompts[i];
      if (this.done[i] !== 0 || p === null || p === undefined || p.length === 0) continue;
      out ??= [];
      if (this.keptSeqs[i]! >= 0) (moved ??= []).push({ prompt_index: out.length, seq: this.keptSeqs[i]! });
      if (this.open[i] === 1) (open ??= []).push(out.length);
      out.push(fingerprintBytes(p));
    }
    if (out !== null) d.prompts = out;
    if (moved !== null) d.moved_claims = moved;
    if (open !== null) d.open_claims = open;
  }

  private grow(): void {
    const n = this.at.length * 2;
    const at = new Float64Array(n);
    const order = new Float64Array(n);
    const seen = new Float64Array(n);
    const done = new Uint8Array(n);
    const prompts = new Array<Uint32Array | null>(n).fill(null);
    const tokens = new Float64Array(n);
    const keptSeqs = new Float64Array(n);
    const open = new Uint8Array(n);
    const mask = this.at.length - 1;
    for (let k = 0; k < this.size; k++) {
      at[k] = this.at[(this.head + k) & mask]!;
      order[k] = this.order[(this.head + k) & mask]!;
      seen[k] = this.seen[(this.head + k) & mask]!;
      done[k] = this.done[(this.head + k) & mask]!;
      prompts[k] = this.prompts[(this.head + k) & mask]!;
      tokens[k] = this.tokens[(this.head + k) & mask]!;
      keptSeqs[k] = this.keptSeqs[(this.head + k) & mask]!;
      open[k] = this.open[(this.head + k) & mask]!;
    }
    this.at = at;
    this.order = order;
    this.seen = seen;
    this.done = done;
    this.prompts = prompts;
    this.tokens = tokens;
    this.keptSeqs = keptSeqs;
    this.open = open;
    this.head = 0;
  }
}

/** `amount` summed over `of` decisions, less `later` of them at the mean (0 when none is left). */
function atMeanBefore(amount: number, of: number, later: number): number {
  return of <= 0 ? 0 : (amount * (of - Math.min(of, later))) / of;
}

/** How many of `seqs` were ordered after `seq`. */
function laterThan(seqs: readonly number[], seq: number): number {
  let n = 0;
  for (let i = 0; i < seqs.length; i++) if (seqBefore(seq, seqs[i]!)) n++;
  return n;
}

/** reported_at_ms of the load a decision saw; −1 without a load report (not a candidate then). */
function reportStamp(inst: RouterInstance): number {
  return inst.load === null ? -1 : inst.load.reportedAtMs;
}

export interface InflightLoadOptions {
  /** This router's id, as it watches the view and reports (its share in the view is skipped). */
  readonly routerId: string;
  /** Default INFLIGHT_TTL_MS. */
  readonly ttlMs?: number;
  /** Monotonic clock in ms (default performance.now). */
  readonly monotonicMs?: () => number;
}

export class InflightLoad {
  readonly routerId: string;
  private readonly ttlMs: number;
  private readonly clock: () => number;
  private readonly rings = new Map<string, DecisionRing>();
  /** ledgerFootprint's list of the prompts ahead and which follow the producer, reused (entries past its count are stale). */
  private readonly aheadScratch: Uint32Array[] = [];
  private afterProducer: Uint8Array = new Uint8Array(16);
  /** The directory's seq of each ledger entry in aheadScratch (−1: not carried), ledgerFootprint's scratch. */
  private aheadSeqs = new Float64Array(16);
  /** Rings that hold (or held: their openCount says) this router's open claims. */
  private readonly openRings = new Set<DecisionRing>();
  /** Rings with unreported decisions, in first-decision order. */
  private outbox: DecisionRing[] = [];
  /** Told when the outbox gets its first ring since the last drain (the reporter schedules a send). */
  onOutbox: (() => void) | null = null;
  private prefillIds = 0;
  /** Set when `others` finds another router's share (ClaimOrder reads and clears it). */
  sawOtherRouter = false;
  /**
   * While a claim is re-decided (ClaimOrder): load and pending credit only from the decisions
   * ordered before it — the other routers' with a directory seq before `seq` (their decisions
   * without a prompt, which carry no seq, all count), this router's made before `ownBeforeMs` —
   * as one router deciding in arrival order would have seen them.
   */
  private orderBound: { readonly seq: number; readonly ownBeforeMs: number } | null = null;

  constructor(opts: InflightLoadOptions) {
    this.routerId = opts.routerId;
    this.ttlMs = opts.ttlMs ?? INFLIGHT_TTL_MS;
    this.clock = opts.monotonicMs ?? (() => performance.now());
  }

  /** The monotonic time `own` and `record` use (one read per decision). */
  now(): number {
    return this.clock();
  }

  /**
   * One decision for `inst` (the instance as the view carries it), counted at once, with its
   * prompt's fingerprints and its predicted prefill tokens (−1: not known). Returns its sequence
   * number for `complete`.
   */
  record(inst: RouterInstance, nowMs: number = this.clock(), prompt: Uint32Array | null = null, prefillTokens = -1): number {
    return this.recordAt(inst, nowMs, nowMs, prompt, prefillTokens, -1);
  }

  /**
   * A claim moved to `inst` (claim order), counted there from `nowMs` as `record` counts: it keeps
   * its place in the order, the directory's seq `keptSeq` among the other replicas' claims, and
   * its first decision's time `firstAtMs` among this router's own.
   */
  recordMove(inst: RouterInstance, nowMs: number, firstAtMs: number, prompt: Uint32Array, prefillTokens: number, keptSeq: number): number {
    return this.recordAt(inst, nowMs, firstAtMs, prompt, prefillTokens, keptSeq);
  }

  private recordAt(inst: RouterInstance, nowMs: number, orderMs: number, prompt: Uint32Array | null, prefillTokens: number, keptSeq: number): number {
    const ring = this.ringOf(inst.name);
    ring.stamp = reportStamp(inst);
    const seq = ring.push(nowMs, orderMs, ring.stamp, prompt, prefillTokens, keptSeq);
    ring.unreported++;
    ring.newestUnreportedAt = nowMs;
    this.queue(ring);
    return seq;
  }

  /**
   * A proxied request with `prefillTokens` of prefill enters `inst`'s prefill ledger (routing
   * by predicted TTFT): it stays there, and in the gauge the other replicas see, until
   * `endPrefill` (its first token, or its answer, whichever the proxy sees first). Dated `atMs`:
   * its decision, or a moved claim's first decision (its place in this router's order). Returns its id.
   */
  startPrefill(inst: RouterInstance, prefillTokens: number, prompt: Uint32Array | null = null, atMs: number = this.clock()): number {
    const ring = this.ringOf(inst.name);
    const id = ++this.prefillIds;
    ring.ledger.start(id, prefillTokens > 0 && Number.isFinite(prefillTokens) ? prefillTokens : 0, prompt, atMs);
    this.queue(ring);
    return id;
  }

  /** Ledger entry `id` of `instanceName` is over (idempotent). */
  endPrefill(instanceName: string, id: number): void {
    const ring = this.rings.get(instanceName);
    if (ring !== undefined && ring.ledger.end(id, this.clock())) this.queue(ring);
  }

  /** This router's prefill ledger for `inst` (null before its first proxied request there). */
  ledgerOf(inst: RouterInstance): PrefillLedger | null {
    return this.rings.get(inst.name)?.ledger ?? null;
  }

  /**
   * This router's ledger for `inst`: requests before their first token, and their prefill tokens
   * (while a claim is re-decided, those sent before it: its own entry is not ahead of itself).
   */
  ownOutstandingRequests(inst: RouterInstance): number {
    const ledger = this.rings.get(inst.name)?.ledger;
    if (ledger === undefined) return 0;
    return this.orderBound === null ? ledger.requests : ledger.requestsBefore(this.orderBound.ownBeforeMs);
  }

  ownOutstandingTokens(inst: RouterInstance): number {
    const ledger = this.rings.get(inst.name)?.ledger;
    if (ledger === undefined) return 0;
    return this.orderBound === null ? ledger.tokens : ledger.tokensBefore(this.orderBound.ownBeforeMs);
  }

  /**
   * The longest prefix, in granules, `prompt` shares with one of the ledger entries for `inst`
   * (requests there before their first token: their prefix is computed before a request queued
   * behind them runs) — this router's, and the newest of the other replicas' as the view carries
   * them (`viewStale`: none) — at least `best`. TTFT's pending credit beyond the in-flight
   * entries, which a load report ends while the request may still be queued.
   */
  ledgerPendingGranules(inst: RouterInstance, prompt: Uint32Array, best: number, viewStale = false): number {
    if (prompt.length === 0) return best;
    const ring = this.rings.get(inst.name);
    if (ring !== undefined) best = ring.ledger.pendingGranules(prompt, best, this.orderBound === null ? Number.POSITIVE_INFINITY : this.orderBound.ownBeforeMs);
    // The other replicas' ledgers (their newest prompts, through the view): not while a claim is
    // re-decided (they carry no directory order), nor from a stale view.
    if (viewStale || this.orderBound !== null) return best;
    const shares = inst.inflight;
    for (let i = 0; i < shares.length && best < prompt.length; i++) {
      const s = shares[i]!;
      if (s.routerId === this.routerId) continue;
      for (let j = 0; j < s.outstandingPrompts.length; j++) best = longerShared(prompt, s.outstandingPrompts[j]!, best);
    }
    return best;
  }

  /**
   * Granules the prefill ledgers' prompts for `inst` touch beyond `prompt`'s prefix (every
   * replica's: this router's entries and the newest the view carries of the others'; none of the
   * others' on a stale view): what a full pool keeps before `prompt`'s cached prefix
   * (footprints), as `out.all`. Requests without token ids are not in it.
   *
   * `out.included`: the same of the entries after the last one sharing `producerGranules` (> 0)
   * with `prompt`, in the ledger that holds it — the pending prefix's producer computes it, so only
   * what runs after it can evict it. A ledger is in send order. Between ledgers the directory's
   * order decides where it is known: an entry whose decision the view still carries with a seq
   * (InflightShare.prompt_seqs, until its load report) counts when it was ordered after the latest
   * such producer. Others of a ledger without a producer are not counted (they may all run before
   * it: counting them split a task's branches over engines; agentic with pressured KV, 4 routers,
   * kept 0.93 of CAR's hit ratio so and 0.97 without). One pass over the prompts.
   */
  ledgerFootprint(inst: RouterInstance, prompt: Uint32Array, viewStale: boolean, producerGranules: number, out: Footprint): Footprint {
    const ahead = this.aheadScratch;
    const shares = viewStale ? NO_SHARES : inst.inflight;
    // Seqs matter only to order entries after a pending prefix's producer: none without one.
    const ordered = producerGranules > 0;
    let n = this.rings.get(inst.name)?.ledger.collectPrompts(ahead, 0) ?? 0;
    this.ensureAfterProducer(n);
    markAfterProducer(ahead, 0, n, prompt, producerGranules, this.afterProducer);
    if (ordered) this.seqsOf(ahead, 0, n, ownShare(shares, this.routerId));
    for (let i = 0; i < shares.length; i++) {
      const s = shares[i]!;
      if (s.routerId === this.routerId) continue;
      const from = n;
      for (let j = 0; j < s.outstandingPrompts.length; j++) ahead[n++] = s.outstandingPrompts[j]!;
      this.ensureAfterProducer(n);
      markAfterProducer(ahead, from, n, prompt, producerGranules, this.afterProducer);
      if (ordered) this.seqsOf(ahead, from, n, s);
    }
    if (ordered) markOrderedAfterProducer(ahead, n, prompt, producerGranules, this.aheadSeqs, this.afterProducer);
    return footprints(prompt, ahead, n, this.afterProducer, out);
  }

  /** aheadSeqs[from..to): the directory's seq of each entry's decision as share `s` carries it, −1 when it does not. */
  private seqsOf(ahead: readonly Uint32Array[], from: number, to: number, s: InflightShare | null): void {
    if (this.aheadSeqs.length < to) {
      const grown = new Float64Array(to * 2);
      grown.set(this.aheadSeqs);
      this.aheadSeqs = grown;
    }
    for (let j = from; j < to; j++) this.aheadSeqs[j] = s === null ? -1 : seqOfPrompt(s, ahead[j]!);
  }

  /** Room for `n` marks in afterProducer, the marks so far kept. */
  private ensureAfterProducer(n: number): void {
    if (this.afterProducer.length >= n) return;
    const grown = new Uint8Array(n * 2);
    grown.set(this.afterProducer);
    this.afterProducer = grown;
  }

  /**
   * The other replicas' ledgers for `inst` as the view carries them (none on a stale view). While
   * a claim is re-decided, less each ledger's decisions the directory ordered after the claim (a
   * gauge carries no order; its requests in flight do): those among its newest prompts at their
   * own tokens, the rest at the mean of what remains (orderedLedgerTokens).
   */
  otherOutstandingRequests(inst: RouterInstance, viewStale: boolean): number {
    if (viewStale) return 0;
    let n = 0;
    for (const s of inst.inflight) if (s.routerId !== this.routerId) n += this.orderedShare(s.outstandingRequests, s.outstandingRequests, s);
    return n;
  }

  otherOutstandingTokens(inst: RouterInstance, viewStale: boolean): number {
    if (viewStale) return 0;
    let n = 0;
    for (const s of inst.inflight) if (s.routerId !== this.routerId) n += this.orderedLedgerTokens(s);
    return n;
  }

  /**
   * Share `s`'s ledger tokens; while a claim is re-decided, less those of the requests the
   * directory ordered after it. A request among the gauge's newest prompts that carry their tokens
   * (OutstandingPrefill.prompt_tokens) is taken out at its own tokens, found by its prompt's seq;
   * any other ordered after it at the mean of the rest. The mean alone was wrong by whole prefills
   * where prompts differ a hundredfold (a trace's): a claim ordered after a 38k-token prompt and
   * before a 400-token one counted half of both, and queued a second behind what it predicted.
   */
  private orderedLedgerTokens(s: InflightShare): number {
    const bound = this.orderBound;
    if (bound === null || s.outstandingRequests === 0) return s.outstandingTokens;
    let later = laterThan(s.seqs, bound.seq);
    let tokens = s.outstandingTokens;
    let of = s.outstandingRequests;
    const perPrompt = s.outstandingPromptTokens;
    for (let j = 0; j < perPrompt.length && later > 0; j++) {
      const seq = seqOfPrompt(s, s.outstandingPrompts[j]!);
      if (seq < 0 || !seqBefore(bound.seq, seq)) continue;
      tokens -= perPrompt[j]!;
      of--;
      later--;
    }
    return tokens <= 0 ? 0 : atMeanBefore(tokens, of, later);
  }

  /**
   * `amount`, summed over `of` decisions of share `s`: all of it, except while a claim is
   * re-decided — then the part of the decisions the directory ordered before the claim, each
   * decision at the mean (a share's seqs order its decisions, not its totals).
   */
  private orderedShare(amount: number, of: number, s: InflightShare): number {
    if (this.orderBound === null || of === 0) return amount;
    return atMeanBefore(amount, of, laterThan(s.seqs, this.orderBound.seq));
  }

  private ringOf(name: string): DecisionRing {
    let ring = this.rings.get(name);
    if (ring === undefined) this.rings.set(name, (ring = new DecisionRing(name)));
    return ring;
  }

  /** The engine answered decision `seq` for `instanceName` (the proxy saw the response end). */
  complete(instanceName: string, seq: number): void {
    const ring = this.rings.get(instanceName);
    if (ring === undefined || !ring.complete(seq)) return;
    ring.answeredUnreported++;
    this.queue(ring);
  }

  /**
   * Decision `seq` for `instanceName`, whose prompt the directory numbered `claimSeq`, was moved to
   * another instance before the engine saw it (claim order): it ends here, and the directory ends
   * exactly that decision — an `answered` would end this router's oldest one there, leaving the
   * moved prompt credited on an instance that never gets it.
   */
  withdraw(instanceName: string, seq: number, claimSeq: number): void {
    const ring = this.rings.get(instanceName);
    if (ring === undefined || !ring.withdraw(seq)) return;
    ring.withdrawnUnreported.push(claimSeq);
    this.queue(ring);
  }

  /**
   * Decision `seq` for `instanceName` is a claim (claim order): open until `settle`. Call before
   * the decision is reported (the reporter runs in a microtask), so the directory hears of it as one.
   */
  openClaim(instanceName: string, seq: number): void {
    const ring = this.rings.get(instanceName);
    const i = ring === undefined ? -1 : ring.indexOf(seq);
    if (i < 0) return;
    ring!.setOpen(i, true);
    this.openRings.add(ring!);
  }

  /**
   * Open claim `seq` for `instanceName`, numbered `claimSeq` by the directory (−1: not known yet),
   * settled where it is: the replicas' claims ordered after it stop waiting for it. Returns true
   * when the directory holds it as open but it cannot be named yet (reported, `claimSeq` −1): call
   * `settledSeq` once the view carries its seq.
   */
  settle(instanceName: string, seq: number, claimSeq: number): boolean {
    const ring = this.rings.get(instanceName);
    const i = ring === undefined ? -1 : ring.indexOf(seq);
    if (i < 0 || ring!.open[i] === 0) return false;
    ring!.setOpen(i, false);
    // Its request leaves for the engine now: the load reports so far do not reflect it.
    ring!.seen[i] = ring!.stamp;
    // Not reported yet: it goes out settled (without open_claims).
    if (seq >= ring!.reportedBelowSeq) return false;
    if (claimSeq < 0) return true;
    this.settledSeq(instanceName, claimSeq);
    return false;
  }

  /** This router's claim `claimSeq` (directory seq) on `instanceName` settled there. */
  settledSeq(instanceName: string, claimSeq: number): void {
    const ring = this.ringOf(instanceName);
    ring.settledUnreported.push(claimSeq);
    this.queue(ring);
  }

  /**
   * Whether one of this router's own claims decided before `beforeMs` is still open: one router
   * deciding in arrival order would have placed it first. O(rings holding open claims).
   */
  ownOpenBefore(beforeMs: number): boolean {
    for (const ring of this.openRings) {
      if (ring.openCount === 0) this.openRings.delete(ring);
      else if (ring.openBefore(beforeMs)) return true;
    }
    return false;
  }

  /**
   * The earliest seq (serial order) of the other routers' open claims as `instances`' shares carry
   * them; null when none is open. One pass over the view: the caller keeps it until the next view update.
   */
  earliestOtherOpen(instances: readonly RouterInstance[]): number | null {
    let earliest: number | null = null;
    for (let i = 0; i < instances.length; i++) {
      const shares = instances[i]!.inflight;
      for (let j = 0; j < shares.length; j++) {
        const s = shares[j]!;
        if (s.routerId === this.routerId) continue;
        for (let k = 0; k < s.openClaimSeqs.length; k++) {
          const q = s.openClaimSeqs[k]!;
          if (earliest === null || seqBefore(q, earliest)) earliest = q;
        }
      }
    }
    return earliest;
  }

  private queue(ring: DecisionRing): void {
    if (ring.queued) return;
    ring.queued = true;
    this.outbox.push(ring);
    if (this.outbox.length === 1) this.onOutbox?.();
  }

  /** This router's decisions for `inst` that no load report reflects yet. */
  own(inst: RouterInstance, nowMs: number = this.clock()): number {
    const ring = this.rings.get(inst.name);
    if (ring === undefined) return 0;
    const n = ring.live(reportStamp(inst), nowMs, this.ttlMs);
    return this.orderBound === null ? n : ring.liveBefore(this.orderBound.ownBeforeMs);
  }

  /**
   * The prefill tokens of this router's decisions for `inst` that no load report reflects yet
   * (call after `own`, which ends the ones that are over); while a claim is re-decided, those made
   * before it (its own decision is not ahead of itself).
   */
  ownPrefillTokens(inst: RouterInstance): number {
    const ring = this.rings.get(inst.name);
    return ring === undefined ? 0 : ring.liveTokens(this.orderBound === null ? Number.POSITIVE_INFINITY : this.orderBound.ownBeforeMs);
  }

  /**
   * The prefill tokens of the other routers' decisions for `inst` as the view carries them (none
   * on a stale view): their known tokens, plus `perUnknown` for each decision reported without
   * any (an older router, or one whose policy predicts none). While a claim is re-decided, those
   * ordered before it, as `others` counts them.
   */
  otherPrefillTokens(inst: RouterInstance, viewStale: boolean, perUnknown: number): number {
    if (viewStale) return 0;
    let other = 0;
    const shares = inst.inflight;
    for (let i = 0; i < shares.length; i++) {
      const s = shares[i]!;
      if (s.routerId === this.routerId) continue;
      other += this.orderedShare(s.prefillTokens + Math.max(0, s.count - s.prefillTokenDecisions) * perUnknown, s.count, s);
    }
    return other;
  }

  /**
   * Pending prefix credit: the longest prefix, in 16-token granules, `prompt` shares with a
   * decision for `inst` still counted — this router's (call after `own`, which ends what a
   * report, the TTL or an answer ended) and the other routers' as the view carries them. For a
   * fresh view only: the caller gives no cache credit at all on a stale one (CAR: its view hit
   * must be trusted first), so the others' shares, which nobody expires then, are never read stale.
   */
  pendingGranules(inst: RouterInstance, prompt: Uint32Array): number {
    if (prompt.length === 0) return 0;
    const ring = this.rings.get(inst.name);
    const bound = this.orderBound;
    let best = ring === undefined ? 0 : ring.pendingGranules(prompt, 0, bound === null ? Number.POSITIVE_INFINITY : bound.ownBeforeMs);
    const shares = inst.inflight;
    for (let i = 0; i < shares.length && best < prompt.length; i++) {
      const s = shares[i]!;
      if (s.routerId === this.routerId) continue;
      for (let j = 0; j < s.prompts.length; j++) {
        // A prompt the directory did not order cannot be placed before the claim.
        if (bound !== null && !(j < s.seqs.length && seqBefore(s.seqs[j]!, bound.seq))) continue;
        best = longerShared(prompt, s.prompts[j]!, best);
      }
    }
    return best;
  }

  /**
   * Runs `decide` with load and pending credit bounded to what was ordered before a claim (see
   * orderBound): the other routers' decisions the directory numbered before `seq`, this router's
   * made before `ownBeforeMs` (the claim itself left out).
   */
  orderedBefore<T>(seq: number, ownBeforeMs: number, decide: () => T): T {
    this.orderBound = { seq, ownBeforeMs };
    try {
      return decide();
    } finally {
      this.orderBound = null;
    }
  }

  /**
   * The directory's seq of this router's newest decision for `inst` whose prompt is `prompt`, as
   * the view carries this router's own share; −1 when the view does not carry it (yet).
   */
  ownClaimSeq(inst: RouterInstance, prompt: Uint32Array): number {
    const own = ownShare(inst.inflight, this.routerId);
    return own === null ? -1 : seqOfPrompt(own, prompt);
  }

  /** The other routers' in-flight for `inst` from the view (0 when the view is stale). */
  others(inst: RouterInstance, viewStale: boolean): number {
    if (viewStale) return 0;
    let n = 0;
    const shares = inst.inflight;
    for (let i = 0; i < shares.length; i++) {
      const s = shares[i]!;
      if (s.routerId === this.routerId) continue;
      n += this.orderedShare(s.count, s.count, s);
      this.sawOtherRouter = true;
    }
    return n;
  }

  /**
   * The decisions made since the previous drain, per instance, dated by their age at `nowMs`, and
   * the reported ones answered or withdrawn since; null when there are none. Decisions older than the TTL are
   * not worth sending (already ended).
   */
  drainReport(nowMs: number = this.clock()): WireInflightDecisions[] | null {
    if (this.outbox.length === 0) return null;
    const out: WireInflightDecisions[] = [];
    for (const ring of this.outbox) {
      const age = nowMs - ring.newestUnreportedAt;
      const count = age < this.ttlMs ? ring.unreported : 0;
      const withdrawn = ring.withdrawnUnreported;
      const settled = ring.settledUnreported;
      const gauge = ring.ledger.takeChange(nowMs);
      if (count > 0 || ring.answeredUnreported > 0 || withdrawn.length > 0 || settled.length > 0 || gauge !== null) {
        const d: WireInflightDecisions = { instance_name: ring.name, count, age_ms: count > 0 ? Math.max(0, Math.floor(age)) : 0 };
        if (gauge !== null) d.outstanding_prefill = gauge;
        if (ring.answeredUnreported > 0) d.answered = ring.answeredUnreported;
        if (withdrawn.length > 0) {
          d.withdrawn_seqs = withdrawn;
          ring.withdrawnUnreported = [];
        }
        if (settled.length > 0) {
          d.settled_seqs = settled;
          ring.settledUnreported = [];
        }
        if (count > 0) ring.reportPrompts(d);
        const tokens = count > 0 ? ring.unreportedTokens() : null;
        if (tokens !== null) d.prefill_tokens = tokens;
        out.push(d);
      }
      ring.unreported = 0;
      ring.reportedBelowSeq = ring.headSeq + ring.size;
      ring.answeredUnreported = 0;
      ring.queued = false;
    }
    this.outbox = [];
    return out.length === 0 ? null : out;
  }
}

/**
 * Marks, among ahead[0..count), the entries the directory ordered after the latest entry sharing
 * `granules` (> 0) with `prompt` whose seq is known (seqs −1: unknown): between ledgers that is the
 * only order there is. Marks only ever added: what one ledger's send order marks stays. O(count).
 */
function markOrderedAfterProducer(ahead: readonly Uint32Array[], count: number, prompt: Uint32Array, granules: number, seqs: Float64Array, after: Uint8Array): void {
  let producer = -1;
  for (let j = 0; j < count; j++) {
    const seq = seqs[j]!;
    if (seq >= 0 && sharesGranules(ahead[j]!, prompt, granules) && (producer < 0 || seqBefore(producer, seq))) producer = seq;
  }
  if (producer < 0) return;
  for (let j = 0; j < count; j++) if (seqs[j]! >= 0 && seqBefore(producer, seqs[j]!)) after[j] = 1;
}

/** The seq share `s` carries for the decision whose prompt is `prompt` (its newest such), −1 when none. */
function seqOfPrompt(s: InflightShare, prompt: Uint32Array): number {
  for (let j = Math.min(s.prompts.length, s.seqs.length) - 1; j >= 0; j--) if (sameFingerprints(s.prompts[j]!, prompt)) return s.seqs[j]!;
  return -1;
}

/** This router's own share among `shares` (the view carries its decisions back with their seqs), null when absent. */
function ownShare(shares: readonly InflightShare[], routerId: string): InflightShare | null {
  for (let i = 0; i < shares.length; i++) if (shares[i]!.routerId === routerId) return shares[i]!;
  return null;
}

/**
 * Marks in `after[from..to)` the entries of `list[from..to)` (one ledger's prompts, in send order)
 * after the last one sharing `granules` with `prompt`; none when no entry does. O(to − from).
 */
function markAfterProducer(list: readonly Uint32Array[], from: number, to: number, prompt: Uint32Array, granules: number, after: Uint8Array): void {
  let last = to;
  for (let j = to - 1; j >= from; j--) {
    if (sharesGranules(list[j]!, prompt, granules)) {
      last = j;
      break;
    }
  }
  for (let j = from; j < to; j++) after[j] = j > last ? 1 : 0;
}
