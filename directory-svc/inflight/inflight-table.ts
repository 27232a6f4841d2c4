/**
 * The directory's fold of every router's in-flight reports (routing.md "In-flight load"): per
 * instance, the decisions routed to it that no load report reflects yet, per reporting router.
 * The view carries the result as ViewInstance.inflight, so replicas on the same view version see
 * the same counts.
 *
 * An entry is dated on the directory's monotonic clock (arrival minus the age the router gave),
 * and ends when a load report for its instance is accepted after that date, or INFLIGHT_TTL_MS
 * after it, or when its router reports the engine answered it (oldest of that router's first,
 * as the router ends its own count: replicas then agree on a request's end to within the
 * report interval, instead of the others counting it until the engine's next heartbeat), or
 * when its router withdraws that very decision (claim order moved it elsewhere).
 * Pure: time comes in as arguments; `onChange` names each instance whose shares changed.
 */
import { performance } from 'node:perf_hooks';
import { carriesLastEnd, NO_LAST_END, type WireInflightShare, type WireOutstandingPrefill } from '../../shared/view/view-wire.js';
import { PENDING_PROMPTS_PER_SHARE } from '../../shared/keys/prompt-fingerprint.js';

export const INFLIGHT_TTL_MS = 2000;
/**
 * How long a router's gauge with no request left keeps its last first token there (below). An
 * older end comes before the send of any head the TTFT policy would weigh it against, except for
 * a request queued longer than this.
 */
export const LAST_END_KEEP_MS = 10_000;

interface Entry {
  readonly routerId: string;
  count: number;
  readonly atMs: number;
  /** Prompt fingerprints of the entry's decisions (pending prefix credit), oldest first; ≤ count. */
  prompts: readonly Buffer[];
  /** Per prompt, its arrival order (InflightTable's claim counter). */
  seqs: readonly number[];
  /** Predicted prefill tokens of the entry's newest decisions (≤ count; the TTFT policy's queued work). */
  tokens: readonly number[];
  /** The seqs of its decisions that are open claims (InflightDecisions.open_claims), until they settle or end. */
  open: readonly number[];
}

const NO_PROMPTS: readonly Buffer[] = Object.freeze([]);
const NO_SEQS: readonly number[] = Object.freeze([]);
const NO_TOKENS: readonly number[] = Object.freeze([]);

/**
 * The newest `n` of `items` (oldest first), at most what a share carries: an entry never needs
 * more prompts, whatever its count.
 */
function newest<T>(items: readonly T[], n: number, none: readonly T[]): readonly T[] {
  const keep = Math.min(n, PENDING_PROMPTS_PER_SHARE);
  if (items.length <= keep) return items;
  return keep === 0 ? none : items.slice(items.length - keep);
}

/** Keeps the newest `n` prompts of `e` and their seqs, and the prefill tokens of its newest `n` decisions. */
function keepNewest(e: Entry, n: number): void {
  e.prompts = newest(e.prompts, n, NO_PROMPTS);
  e.seqs = newest(e.seqs, n, NO_SEQS);
  // An open claim whose decision ended is settled: nobody waits for it any more.
  if (e.open.length > 0) e.open = e.open.filter((q) => e.seqs.includes(q));
  if (e.tokens.length > n) e.tokens = n === 0 ? NO_TOKENS : e.tokens.slice(e.tokens.length - n);
}

const NO_SHARES: readonly WireInflightShare[] = Object.freeze([]);
const NO_MOVED: readonly MovedClaim[] = Object.freeze([]);

/** A claim moved to the reported instance: prompts[prompt_index] keeps the seq it had where it was withdrawn. */
export interface MovedClaim {
  readonly prompt_index: number;
  readonly seq: number;
}

/** Removes `seq` from `e`'s open claims; true when it was one. */
function settle(e: Entry, seq: number): boolean {
  const j = e.open.indexOf(seq);
  if (j < 0) return false;
  e.open = e.open.filter((_, k) => k !== j);
  return true;
}

/** Reduces `e` to its open claims (a load report ended the rest); true when anything went. */
function onlyOpen(e: Entry): boolean {
  if (e.count === e.open.length) return false;
  const keep = e.seqs.map((q) => e.open.includes(q));
  // Tokens belong to the entry's newest decisions, as its prompts do (see withdraw).
  const offset = e.tokens.length - e.prompts.length;
  e.tokens = e.tokens.filter((_, t) => t - offset >= 0 && keep[t - offset] === true);
  e.prompts = e.prompts.filter((_, j) => keep[j]);
  e.seqs = e.seqs.filter((_, j) => keep[j]);
  e.count = e.open.length;
  return true;
}

/** The seq `moved` keeps for prompt `index`, −1 when it is a new decision. */
function keptSeq(moved: readonly MovedClaim[], index: number): number {
  for (let j = 0; j < moved.length; j++) if (moved[j]!.prompt_index === index) return moved[j]!.seq;
  return -1;
}

/** A router's outstanding-prefill gauge for one instance, its head and last end on the table's clock (NaN: none). */
interface OutstandingGauge {
  readonly tokens: number;
  readonly requests: number;
  readonly headTokens: number;
  readonly headAtMs: number;
  readonly lastEndAtMs: number;
  readonly prompts: readonly Buffer[];
  /** Per prompt, its prefill tokens; empty from routers without them. */
  readonly promptTokens: readonly number[];
}

/** The gauge as the view carries it at `nowMs`: the head and last end as ages again. */
function foldGauge(o: OutstandingGauge, nowMs: number): WireOutstandingPrefill {
  const out: WireOutstandingPrefill = { tokens: String(o.tokens), requests: o.requests };
  if (o.headTokens > 0) {
    out.head_tokens = String(o.headTokens);
    out.head_age_ms = age(nowMs - o.headAtMs);
  }
  if (carriesLastEnd(o.headTokens, o.requests)) out.last_end_age_ms = Number.isNaN(o.lastEndAtMs) ? NO_LAST_END : age(nowMs - o.lastEndAtMs);
  if (o.prompts.length > 0) out.prompts = o.prompts as Buffer[];
  if (o.promptTokens.length > 0) out.prompt_tokens = o.promptTokens as number[];
  return out;
}

function age(ms: number): number {
  return Math.min(NO_LAST_END - 1, Math.max(0, Math.floor(ms)));
}

class InstanceInflight {
  /** Oldest first (reports arrive in time order; a late one is inserted in place). */
  entries: Entry[] = [];
  /** Per router, its outstanding-prefill gauge (requests before their first token, their tokens, its head). */
  outstanding = new Map<string, OutstandingGauge>();
  /** The shares as last folded, without the gauges: sharesAt adds them, aged as of its call. */
  shares: readonly WireInflightShare[] = NO_SHARES;

  get empty(): boolean {
    return this.entries.length === 0 && this.outstanding.size === 0;
  }

  add(e: Entry): void {
    let i = this.entries.length;
    while (i > 0 && this.entries[i - 1]!.atMs > e.atMs) i--;
    this.entries.splice(i, 0, e);
  }

  /** Drops the gauges with no request whose last first token came before `limitMs`; true when any went. */
  dropIdleGaugesBefore(limitMs: number): boolean {
    let dropped = false;
    for (const [routerId, o] of this.outstanding) {
      if (o.requests === 0 && o.lastEndAtMs < limitMs) dropped = this.outstanding.delete(routerId) || dropped;
    }
    return dropped;
  }

  /** Ends up to `n` of `routerId`'s decisions, oldest first; true when any ended. */
  answered(routerId: string, n: number): boolean {
    let left = n;
    for (let i = 0; i < this.entries.length && left > 0; i++) {
      const e = this.entries[i]!;
      if (e.routerId !== routerId) continue;
      const take = Math.min(e.count, left);
      e.count -= take;
      left -= take;
      // The engine answers in FIFO order: the oldest decisions' prompts end first.
      keepNewest(e, e.count);
    }
    if (left === n) return false;
    let kept = 0;
    for (const e of this.entries) if (e.count > 0) this.entries[kept++] = e;
    this.entries.length = kept;
    return true;
  }

  /**
   * Ends `routerId`'s decision whose prompt has directory seq `seq`: that prompt and one of its
   * entry's count, not the oldest. True when this table still held it.
   */
  withdraw(routerId: string, seq: number): boolean {
    for (let i = 0; i < this.entries.length; i++) {
      const e = this.entries[i]!;
      if (e.routerId !== routerId) continue;
      const j = e.seqs.indexOf(seq);
      if (j < 0) continue;
      if (e.tokens.length > 0) {
        // Prompts and tokens both belong to the entry's newest decisions: prompt j is decision
        // count − prompts + j; without a token of its own, the oldest token goes (the count did).
        const t = e.tokens.length - e.prompts.length + j;
        e.tokens = e.tokens.filter((_, k) => k !== (t >= 0 && t < e.tokens.length ? t : 0));
      }
      e.prompts = e.prompts.filter((_, k) => k !== j);
      e.seqs = e.seqs.filter((_, k) => k !== j);
      settle(e, seq);
      e.count--;
      if (e.count === 0) this.entries.splice(i, 1);
      return true;
    }
    return false;
  }

  /** Settles `routerId`'s open claim `seq` (it stays where it is); true when it was open here. */
  settle(routerId: string, seq: number): boolean {
    for (const e of this.entries) if (e.routerId === routerId && settle(e, seq)) return true;
    return false;
  }

  /**
   * Drops entries dated before `limitMs` (or at it, when `inclusive`); true when any changed. With
   * `keepOpen` (a load report), an entry's open claims stay: their router still holds them, so no
   * report can reflect them yet (the TTL still ends them).
   */
  dropBefore(limitMs: number, inclusive = false, keepOpen = false): boolean {
    let n = 0;
    while (n < this.entries.length && (this.entries[n]!.atMs < limitMs || (inclusive && this.entries[n]!.atMs === limitMs))) n++;
    if (n === 0) return false;
    let changed = false;
    let kept = 0;
    for (let i = 0; i < n; i++) {
      const e = this.entries[i]!;
      if (keepOpen && e.open.length > 0) {
        changed = onlyOpen(e) || changed;
        this.entries[kept++] = e;
      } else changed = true;
    }
    if (kept < n) this.entries.splice(kept, n - kept);
    return changed;
  }

  refold(): void {
    if (this.empty) {
      this.shares = NO_SHARES;
      return;
    }
    type Fold = { count: number; prompts: Buffer[]; seqs: number[]; tokens: number; tokenDecisions: number; open: number[] };
    const byRouter = new Map<string, Fold>();
    const of = (routerId: string): Fold => {
      let r = byRouter.get(routerId);
      if (r === undefined) byRouter.set(routerId, (r = { count: 0, prompts: [], seqs: [], tokens: 0, tokenDecisions: 0, open: [] }));
      return r;
    };
    for (const routerId of this.outstanding.keys()) of(routerId);
    for (const e of this.entries) {
      const r = of(e.routerId);
      r.count += e.count;
      for (const p of e.prompts) r.prompts.push(p);
      for (const q of e.seqs) r.seqs.push(q);
      for (const t of e.tokens) r.tokens += t;
      r.tokenDecisions += e.tokens.length;
      for (const q of e.open) r.open.push(q);
    }
    this.shares = [...byRouter]
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .map(([router_id, r]) => {
        const share: WireInflightShare = {
          router_id,
          count: r.count,
          prompts: newest(r.prompts, PENDING_PROMPTS_PER_SHARE, NO_PROMPTS) as Buffer[],
          prompt_seqs: newest(r.seqs, PENDING_PROMPTS_PER_SHARE, NO_SEQS) as number[],
        };
        // Only when some decision carried them: shares from routers without them stay as they were.
        if (r.tokenDecisions > 0) {
          share.prefill_tokens = String(r.tokens);
          share.prefill_token_decisions = r.tokenDecisions;
        }
        if (r.open.length > 0) share.open_claim_seqs = r.open;
        return share;
      });
  }

  /**
   * The shares with their gauges, aged as of `nowMs`. The view re-sends an instance's shares
   * whenever anything else of it changes (a load report, KV events) without a refold; ages taken
   * at the fold would then date a head and a last first token later than they were, by the time
   * since, and every other replica would take the engine to have started its head that much
   * later: a long prefill read as just begun at each heartbeat.
   */
  sharesAt(nowMs: number): readonly WireInflightShare[] {
    if (this.outstanding.size === 0) return this.shares;
    return this.shares.map((share) => {
      const o = this.outstanding.get(share.router_id);
      return o === undefined ? share : { ...share, outstanding_prefill: foldGauge(o, nowMs) };
    });
  }
}

export class InflightTable {
  private readonly byInstance = new Map<string, InstanceInflight>();
  /**
   * When each instance's latest load report was accepted: a decision dated before it arrives
   * late (the router's message crossed the report) and is already reflected by it — the router
   * ended its own copy on that report and will not report its answer, so keeping it would hold a
   * phantom on every other replica until the next report.
   */
  private readonly lastReportAt = new Map<string, number>();
  private readonly listeners: ((instanceName: string) => void)[] = [];
  /**
   * The next prompt's arrival order: replicas that claimed a new prefix at nearly the same time
   * agree on which claim came first by it (routing.md "In-flight load", claim order).
   */
  private nextSeq = 0;

  constructor(
    private readonly ttlMs: number = INFLIGHT_TTL_MS,
    /** The clock the gauges' head ages are dated by (monotonic ms). */
    private readonly clock: () => number = () => performance.now(),
  ) {}

  onChange(listener: (instanceName: string) => void): () => void {
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  /** The per-router shares of `instanceName`, sorted by router id, their gauges' ages as of now; empty when none. */
  sharesOf(instanceName: string): readonly WireInflightShare[] {
    return this.byInstance.get(instanceName)?.sharesAt(this.clock()) ?? NO_SHARES;
  }

  /** Total in-flight of `instanceName` over every router. */
  totalOf(instanceName: string): number {
    let n = 0;
    for (const s of this.byInstance.get(instanceName)?.shares ?? NO_SHARES) n += s.count;
    return n;
  }

  /**
   * `count` decisions of `routerId` for `instanceName`, made at `decidedAtMs` (directory clock),
   * with the prompt fingerprints of (at most `count` of) them and the predicted prefill tokens of
   * (at most `count` of) the newest of them. Each prompt gets the next seq, except the claims
   * moved here (`moved`: an index into `prompts` and the seq it had where it was withdrawn), which
   * keep their place in the order. The decisions `open` names (indexes into `prompts`) are open
   * claims until `settled` or their end.
   */
  report(
    routerId: string,
    instanceName: string,
    count: number,
    decidedAtMs: number,
    nowMs: number,
    prompts: readonly Buffer[] = NO_PROMPTS,
    tokens: readonly number[] = NO_TOKENS,
    moved: readonly MovedClaim[] = NO_MOVED,
    open: readonly number[] = NO_SEQS,
  ): void {
    if (count <= 0 || nowMs - decidedAtMs >= this.ttlMs) return;
    if (decidedAtMs < (this.lastReportAt.get(instanceName) ?? Number.NEGATIVE_INFINITY)) return;
    let inst = this.byInstance.get(instanceName);
    if (inst === undefined) this.byInstance.set(instanceName, (inst = new InstanceInflight()));
    const kept = newest(prompts, count, NO_PROMPTS);
    const dropped = prompts.length - kept.length;
    const seqs: number[] = [];
    let openSeqs: number[] | null = null;
    for (let i = 0; i < kept.length; i++) {
      const keep = keptSeq(moved, dropped + i);
      const seq = keep >= 0 ? keep : this.nextSeq;
      if (keep < 0) this.nextSeq = (this.nextSeq + 1) >>> 0;
      seqs.push(seq);
      if (open.includes(dropped + i)) (openSeqs ??= []).push(seq);
    }
    inst.add({ routerId, count, atMs: decidedAtMs, prompts: kept, seqs, tokens: tokens.length <= count ? tokens : tokens.slice(tokens.length - count), open: openSeqs ?? NO_SEQS });
    this.changed(instanceName, inst);
  }

  /**
   * `routerId` reports that the engine answered `count` of its decisions for `instanceName`
   * (reported earlier, still counted by it): they end now. An entry this table already ended
   * (a load report, the TTL) is not there to end; a younger one of the same router may end in
   * its place, an undercount the next load report corrects.
   */
  answered(routerId: string, instanceName: string, count: number): void {
    const inst = this.byInstance.get(instanceName);
    if (count > 0 && inst !== undefined && inst.answered(routerId, count)) this.changed(instanceName, inst);
  }

  /**
   * `routerId` moved the decisions whose prompts have these seqs away from `instanceName` before
   * the engine saw them (claim order): exactly those end, so no other replica keeps crediting
   * their prefix there. A seq already ended (a load report, the TTL) ends nothing.
   */
  withdrawn(routerId: string, instanceName: string, seqs: readonly number[]): void {
    this.bySeq(instanceName, seqs, (inst, q) => inst.withdraw(routerId, q));
  }

  /**
   * `routerId`'s open claims with these seqs settled on `instanceName` (claim order: they stay):
   * the replicas' claims ordered after them stop waiting for them. A seq no longer held, or not
   * open, settles nothing.
   */
  settled(routerId: string, instanceName: string, seqs: readonly number[]): void {
    this.bySeq(instanceName, seqs, (inst, q) => inst.settle(routerId, q));
  }

  /** Applies `apply` to `instanceName`'s entries for each of `seqs`; announces a change when one applied. */
  private bySeq(instanceName: string, seqs: readonly number[], apply: (inst: InstanceInflight, seq: number) => boolean): void {
    const inst = this.byInstance.get(instanceName);
    if (inst === undefined) return;
    let any = false;
    for (const q of seqs) any = apply(inst, q) || any;
    if (any) this.changed(instanceName, inst);
  }

  /**
   * `routerId`'s outstanding-prefill gauge for `instanceName`: its proxied requests there before
   * their first token and their prefill tokens, now, with its head and last end dated on this
   * table's clock from the ages the router sent. Not ended by load reports or the TTL: the router
   * clears it, or its stream's end does (routerGone). A gauge of 0 requests clears it unless it
   * carries the router's last first token there: the other replicas' TTFT policies date the
   * engine's progress on the next head from it (the engine was busy with this router's request
   * until then), so it stays, with no request, LAST_END_KEEP_MS.
   */
  setOutstanding(routerId: string, instanceName: string, gauge: WireOutstandingPrefill): void {
    const tokens = Number(gauge.tokens);
    const requests = gauge.requests;
    let inst = this.byInstance.get(instanceName);
    const lastEndAge = gauge.last_end_age_ms ?? NO_LAST_END;
    // No request left: only its last first token, if it has one, stays.
    const idle = requests <= 0;
    if (idle && lastEndAge === NO_LAST_END) {
      if (inst === undefined || !inst.outstanding.delete(routerId)) return;
    } else {
      if (inst === undefined) this.byInstance.set(instanceName, (inst = new InstanceInflight()));
      const headTokens = idle ? 0 : Number(gauge.head_tokens ?? 0);
      const dated = carriesLastEnd(headTokens, requests);
      const o = inst.outstanding.get(routerId);
      // A repeat of a gauge that carries no time and no prompt changes nothing (one with a time re-dates it).
      if (!dated && (gauge.prompts ?? NO_PROMPTS).length === 0 && o !== undefined && o.headTokens === 0 && o.prompts.length === 0 && o.tokens === tokens && o.requests === requests) return;
      const now = this.clock();
      inst.outstanding.set(routerId, {
        tokens: idle ? 0 : tokens,
        requests,
        headTokens,
        headAtMs: headTokens > 0 ? now - (gauge.head_age_ms ?? 0) : Number.NaN,
        lastEndAtMs: dated && lastEndAge !== NO_LAST_END ? now - lastEndAge : Number.NaN,
        prompts: idle ? NO_PROMPTS : (gauge.prompts ?? NO_PROMPTS),
        promptTokens: idle ? NO_TOKENS : (gauge.prompt_tokens ?? NO_TOKENS),
      });
    }
    this.changed(instanceName, inst);
  }

  /** Every gauge of `routerId` goes (its ReportInflight stream ended). */
  routerGone(routerId: string): void {
    for (const [name, inst] of this.byInstance) if (inst.outstanding.delete(routerId)) this.changed(name, inst);
  }

  /** A load report for `instanceName` accepted at `atMs` ends every entry dated before it. */
  loadReported(instanceName: string, atMs: number): void {
    this.lastReportAt.set(instanceName, atMs);
    const inst = this.byInstance.get(instanceName);
    if (inst !== undefined && inst.dropBefore(atMs, false, true)) this.changed(instanceName, inst);
  }

  /** The instance left the table: its entries go with it (no change is announced, it is gone). */
  forget(instanceName: string): void {
    this.byInstance.delete(instanceName);
    this.lastReportAt.delete(instanceName);
  }

  /** Ends entries older than the TTL, and forgets last first tokens older than LAST_END_KEEP_MS. */
  expire(nowMs: number): void {
    for (const [name, inst] of this.byInstance) {
      const ended = inst.dropBefore(nowMs - this.ttlMs, true);
      if (inst.dropIdleGaugesBefore(nowMs - LAST_END_KEEP_MS) || ended) this.changed(name, inst);
    }
  }

  /** True when some entry is alive (the owner's expiry timer can idle otherwise). */
  get active(): boolean {
    return this.byInstance.size > 0;
  }

  private changed(name: string, inst: InstanceInflight): void {
    inst.refold();
    if (inst.empty) this.byInstance.delete(name);
    for (const l of this.listeners) l(name);
  }
}
