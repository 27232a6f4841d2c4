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
import type { InflightLoad } from './inflight-load.js';
import type { RouteDecision } from '../policy/policy-types.js';
import { chosenTerms } from '../policy/ttft-policy.js';
import type { ViewCache } from '../viewcache/view-cache.js';

/**
 * How many times a claim is ordered at most: a claim ordered before it may have moved onto the
 * instance it moved to meanwhile, so a moved claim is ordered again (route-decider.ts); each
 * round waits one round trip at most (waitFor).
 */
export const MAX_CLAIM_ROUNDS = 3;

/** The longest a claim waits for one round, however long its prefill (the flag's bound). */
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

interface Waiter {
  readonly instanceName: string;
  readonly prompt: Uint32Array;
  readonly resolve: (seq: number) => void;
  readonly timer: NodeJS.Timeout;
}

export class ClaimOrder {
  private readonly waiters = new Set<Waiter>();
  private otherRouterSeenAt = Number.NEGATIVE_INFINITY;
  private readonly clock: () => number;
  private readonly onUpdate = (): void => this.check();
  private listening = false;

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
    const now = this.seqInView(instanceName, prompt);
    if (now >= 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      const w: Waiter = {
        instanceName,
        prompt,
        resolve,
        timer: setTimeout(() => setImmediate(() => this.expire(w)), waitMs),
      };
      this.waiters.add(w);
      if (!this.listening) {
        this.listening = true;
        this.opts.updates.on('update', this.onUpdate);
      }
    });
  }

  /** Waiting claims (tests, status). */
  get waiting(): number {
    return this.waiters.size;
  }

  /** The instances the waiting claims were first routed to. */
  waitingOn(): string[] {
    return [...this.waiters].map((w) => w.instanceName);
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
      const seq = this.seqInView(w.instanceName, w.prompt);
      if (seq >= 0) this.settle(w, seq);
    }
  }

  /**
   * The wait is over: one last look at the view. Timers run before the loop polls for I/O, so on a
   * loop busy past the wait (a burst's other requests) the update carrying the claim may have been
   * waiting in the socket all along; the check phase comes after the poll that applies it.
   */
  private expire(w: Waiter): void {
    this.settle(w, this.seqInView(w.instanceName, w.prompt));
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
