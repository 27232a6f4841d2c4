/**
 * Claim order (routing.md "In-flight load", our extension): router replicas agreeing on where a
 * new prefix goes.
 *
 * Pending prefix credit lets a replica follow a request another replica routed a moment ago, but
 * only once that decision has crossed router → directory → router (a few ms). Two users of a new
 * system prompt arriving at two replicas closer together than that would each find no credit
 * anywhere and land on two engines: the prefix is computed twice and both engines' caches hold it.
 * One router never splits them: it decides in arrival order and sees its own decisions at once.
 *
 * So a cold claim — a decision whose prompt no candidate holds any prefix of, in the view or in
 * flight — is counted and reported as usual, and its answer waits until the view carries the claim
 * back (at most `--car_claim_wait_ms`). The directory numbers decisions in arrival order
 * (InflightShare.prompt_seqs) and publishes them in that order, so once a router sees its own
 * claim it has seen every claim ordered before it. It then decides again as one router would
 * have in that order: load and pending credit only from decisions ordered before its claim, its
 * own claim left out. If the policy then prefers another instance outright (not a tie with the
 * first choice) — one holding an earlier claim of the same prefix, or an idle one where its first
 * choice was taken by an earlier claim of another prefix — the router moves the request there and
 * ends its own claim. Outright, not by a lower score: TTFT follows an earlier claim that is
 * predicted a little later, within its work slack, as one router would have. The earliest claim sees
 * nothing new and stays, so the replicas converge on it. A claim not back in time keeps its
 * first decision.
 *
 * Settled claims: a claim is reported open (InflightDecisions.open_claims) and decides again only
 * once every claim ordered before it has settled — stayed (settled_seqs) or moved (its withdrawal
 * and its decision where it went, in one report) — or its wait has run out again. So it sees
 * each earlier claim where it finally went, as one router deciding in arrival order does; deciding
 * on first choices instead, a burst's claims moved together onto the same idle instance and were
 * ordered again and again. A burst settles claim by claim, one round trip each at most (a
 * router's own claims settle at once, without one). A load report does not end an open claim (its
 * request has not reached the engine); the TTL does.
 *
 * Bursts: requests that arrive together (a trace's arrivals come in bursts of 3–17 at one
 * timestamp) are decided at once on every replica, and each replica sends its share of the burst
 * to the engines it sees idle: the same ones. A warm request is no different when its credit is
 * only a short shared prefix (a system prompt every request starts with), so with
 * `--car_claim_prefill_tokens` a claim is also any request whose own prefill on its first choice
 * reaches that many tokens: a round trip is little beside such a prefill.
 *
 * Only with other replicas: a router that has not seen another router's in-flight share for
 * OTHER_ROUTER_WINDOW_MS decides at once. Other warm requests never wait.
 */
import { performance } from 'node:perf_hooks';
import { INFLIGHT_TTL_MS, type InflightLoad } from './inflight-load.js';
import { seqBefore } from './claim-seq.js';
import type { RouteDecision } from '../policy/policy-types.js';
import { chosenTerms } from '../policy/ttft-policy.js';
import type { ViewCache } from '../viewcache/view-cache.js';

/** The longest a claim waits for its order, and again for the claims before it, however long its prefill (the flag's bound). */
export const MAX_CLAIM_WAIT_MS = 1000;

/** How long after another router's share was last seen this router still orders its claims. */
export const OTHER_ROUTER_WINDOW_MS = 60_000;

/** What the view client offers: an event after every applied view update. */
export interface ViewUpdates {
  on(event: 'update', listener: () => void): unknown;
  off(event: 'update', listener: () => void): unknown;
}

export interface ClaimOrderOptions {
  readonly view: ViewCache;
  readonly updates: ViewUpdates;
  readonly inflight: InflightLoad;
  /** `--car_claim_wait_ms` (> 0). */
  readonly waitMs: number;
  /** `--car_claim_wait_fraction`: of a claim's predicted own prefill time, the longest it waits beyond waitMs (0: waitMs alone). */
  readonly waitFraction?: number;
  /** `--car_claim_prefill_tokens`: a claim whose own prefill reaches it is ordered too (0 = cold claims only). */
  readonly prefillTokens?: number;
  /** Monotonic ms (default performance.now). */
  readonly monotonicMs?: () => number;
}

/** Something a claim waits for in the view: `poll` answers ≥ 0 once it holds, −1 until then. */
interface Waiter {
  readonly poll: () => number;
  readonly resolve: (answer: number) => void;
  readonly timer: NodeJS.Timeout;
  /** The instance the claim was first routed to (status); '' for a wait that is not a claim's order. */
  readonly instanceName: string;
}

export class ClaimOrder {
  private readonly waiters = new Set<Waiter>();
  private otherRouterSeenAt = Number.NEGATIVE_INFINITY;
  private readonly clock: () => number;
  private readonly onUpdate = (): void => {
    this.openScanned = false;
    this.check();
  };
  private listening = false;
  /** The other replicas' earliest open claim (null: none), valid while openScanned (until the next view update). */
  private earliestOpen: number | null = null;
  private openScanned = false;

  constructor(private readonly opts: ClaimOrderOptions) {
    this.clock = opts.monotonicMs ?? (() => performance.now());
  }

  /**
   * `decision` is a claim worth ordering: a counted CAR or TTFT decision on a fresh view, with a
   * fingerprinted prompt, while other replicas are about (RR and SLO_AWARE place by load alone:
   * no prefix to split), that is cold (no prefill candidate has credit for it) or, with
   * `prefillTokens`, whose own prefill on its first choice (`ownPrefillTokens`) reaches it.
   */
  isClaim(decision: RouteDecision, prompt: Uint32Array | null, nowMs: number, ownPrefillTokens: number): boolean {
    const inflight = this.opts.inflight;
    const mono = this.clock();
    if (inflight.sawOtherRouter) {
      this.otherRouterSeenAt = mono;
      inflight.sawOtherRouter = false;
    }
    if (prompt === null || prompt.length === 0 || (decision.policy !== 'CAR' && decision.policy !== 'TTFT')) return false;
    if (mono - this.otherRouterSeenAt > OTHER_ROUTER_WINDOW_MS || this.opts.view.isStale(nowMs)) return false;
    const long = this.opts.prefillTokens ?? 0;
    if (long > 0 && ownPrefillTokens >= long) return true;
    for (const c of decision.candidates) if (c.role === 'prefill' && c.hit_tokens > 0) return false;
    return true;
  }

  /**
   * How long claim `decision` waits for its order at most: `--car_claim_wait_ms`, or the
   * `--car_claim_wait_fraction` of its own prefill time on its first choice when the policy
   * predicts one (TTFT) and that is longer. The round trip costs the same whatever the prompt,
   * but a loop or a directory busy with a burst delays it, and a collision costs a long prefill
   * in proportion: the longer the prefill, the longer an order is worth waiting for.
   */
  waitFor(decision: RouteDecision): number {
    const fraction = this.opts.waitFraction ?? 0;
    const own = fraction > 0 ? chosenTerms(decision)?.own_prefill_ms : undefined;
    return own === undefined || !Number.isFinite(own) ? this.opts.waitMs : Math.max(this.opts.waitMs, Math.min(MAX_CLAIM_WAIT_MS, fraction * own));
  }

  /**
   * The directory's seq of this router's claim of `prompt` on `instanceName`, once the view
   * carries it; −1 after `waitMs` (default `--car_claim_wait_ms`).
   */
  claimSeq(instanceName: string, prompt: Uint32Array, waitMs: number = this.opts.waitMs): Promise<number> {
    return this.until(() => this.seqInView(instanceName, prompt), waitMs, instanceName);
  }

  /**
   * True once no claim ordered before the claim numbered `seq` is open any more — another
   * replica's as the view carries it, or this router's own decided before `ownBeforeMs` — false
   * when one still is after `waitMs`. A claim decided once every claim before it has settled sees
   * them where they went, as one router deciding in arrival order would.
   */
  async earlierSettled(seq: number, ownBeforeMs: number, waitMs: number): Promise<boolean> {
    return (await this.until(() => (this.openBefore(seq, ownBeforeMs) ? -1 : 1), waitMs, '')) > 0;
  }

  /** Whether a claim ordered before `seq` is open: this router's own before `ownBeforeMs`, or another replica's. */
  private openBefore(seq: number, ownBeforeMs: number): boolean {
    if (this.opts.inflight.ownOpenBefore(ownBeforeMs)) return true;
    // Once per view update, however many claims wait: the scan is over every instance's shares.
    if (!this.openScanned) {
      this.openScanned = true;
      this.earliestOpen = this.opts.inflight.earliestOtherOpen(this.opts.view.instances());
    }
    return this.earliestOpen !== null && seqBefore(this.earliestOpen, seq);
  }

  /**
   * A claim settled before its seq came back (it kept its first decision): the directory holds it
   * as open, so its seq is sent as settled once the view carries it (within the in-flight TTL).
   */
  settleWhenSeen(instanceName: string, prompt: Uint32Array): void {
    void this.until(() => this.seqInView(instanceName, prompt), INFLIGHT_TTL_MS, '').then((claimSeq) => {
      if (claimSeq >= 0) this.opts.inflight.settledSeq(instanceName, claimSeq);
    });
  }

  /** This router settled a claim: its own claims ordered after it may go on. */
  settled(): void {
    if (this.waiters.size > 0) this.check();
  }

  /** `poll`'s first answer ≥ 0, checked at once and after every view update; −1 after `waitMs`. */
  private until(poll: () => number, waitMs: number, instanceName: string): Promise<number> {
    // Updates applied while nobody listened may have changed what an earlier scan saw.
    if (!this.listening) this.openScanned = false;
    const now = poll();
    if (now >= 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      const w: Waiter = { poll, resolve, instanceName, timer: setTimeout(() => setImmediate(() => this.expire(w)), waitMs) };
      this.waiters.add(w);
      if (!this.listening) {
        this.listening = true;
        this.opts.updates.on('update', this.onUpdate);
      }
    });
  }

  /** Claims waiting for their order (tests, status). */
  get waiting(): number {
    let n = 0;
    for (const w of this.waiters) if (w.instanceName !== '') n++;
    return n;
  }

  /** The instances the claims waiting for their order were first routed to. */
  waitingOn(): string[] {
    return [...this.waiters].filter((w) => w.instanceName !== '').map((w) => w.instanceName);
  }

  /** Answers every waiting claim with −1 (the router is closing). */
  close(): void {
    for (const w of [...this.waiters]) this.settle(w, -1);
  }

  private seqInView(instanceName: string, prompt: Uint32Array): number {
    const inst = this.opts.view.instance(instanceName);
    return inst === null ? -1 : this.opts.inflight.ownClaimSeq(inst, prompt);
  }

  private check(): void {
    for (const w of [...this.waiters]) {
      const answer = w.poll();
      if (answer >= 0) this.settle(w, answer);
    }
  }

  /**
   * The wait is over: one last look at the view. Timers run before the loop polls for I/O, so on a
   * loop busy past the wait (a burst's other requests) the update carrying the claim may have been
   * waiting in the socket all along; the check phase comes after the poll that applies it.
   */
  private expire(w: Waiter): void {
    this.settle(w, w.poll());
  }

  private settle(w: Waiter, seq: number): void {
    if (!this.waiters.delete(w)) return;
    clearTimeout(w.timer);
    if (this.waiters.size === 0 && this.listening) {
      this.listening = false;
      this.opts.updates.off('update', this.onUpdate);
    }
    w.resolve(seq);
  }
}
