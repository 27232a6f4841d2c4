/**
 * Stale-credit monitor: samples both routers' query endpoint continuously and checks every hit
 * they report against the engines' true KV state (chaos-engine.ts's read-only residency route).
 *
 * One round: read every engine's residency for every watched prompt (one request per engine),
 * then query each router with one watched prompt (rotating). A router's hit `h` on (engine,
 * rank) for prompt p, asked at `qs`, is *backed* when some residency read of that engine taken in
 * [qs − graceMs, the next round's read] showed at least `h` resident tokens of p on that rank.
 * Anything else is STALE CREDIT: a hit on a stream reported unsynchronized, on an engine that no
 * longer answers (killed) for longer than the grace, on a restarted engine's new (empty) pool, or
 * above what the engine holds. The grace is the propagation bound we allow between an engine's
 * change and the routers' views (kv-events §8: a query is an asynchronous observation).
 *
 * The workload's `POST /v1/route` answers are checked the same way: a candidate's hit (the
 * device + host-only tokens of its minimum rank, routing.md) must be backed on some rank by a
 * read of the same incarnation the answer names.
 *
 * A SIGSTOPped engine cannot answer; its pool cannot change while stopped, so its credits are
 * checked against its first read after SIGCONT (an upper bound, as chaos runs never evict) and
 * counted apart as `frozenCredit`: correct about the pool, though the engine could not serve.
 */
import type { QueryResult } from '../../shared/view/query-result.js';
import type { ChaosCluster, EngineHandle } from './chaos-cluster.js';
import type { WireResidencyAnswer } from './engine-residency.js';

interface Read {
  readonly t: number;
  /** null: no answer (dead, restarting). */
  readonly answer: WireResidencyAnswer | null;
  readonly frozen: boolean;
}

export interface StaleSample {
  readonly t: number;
  readonly phase: string;
  readonly router: string;
  readonly engine: string;
  readonly dpRank: number;
  readonly hitTokens: number;
  readonly synchronized: boolean;
  /** Most tokens any read in the window showed (−1: no read answered). */
  readonly backedTokens: number;
}

export interface PhaseCredit {
  checks: number;
  creditedHits: number;
  /**
   * Largest age of the newest read backing a credit that the latest read no longer backs (an
   * upper bound on how long the routers lagged the engine), for credits within the grace.
   */
  maxLagMs: number;
  stale: StaleSample[];
  frozenCredit: number;
  queryFailures: number;
}

/** The part of a `POST /v1/route` answer the monitor checks. */
interface WireRouteAnswer {
  readonly candidates?: readonly { readonly instance_name: string; readonly incarnation_id?: string; readonly device_hit_tokens: number; readonly host_only_hit_tokens: number }[];
}

interface PendingRoute {
  readonly qs: number;
  readonly phase: string;
  readonly router: string;
  readonly promptIndex: number;
  readonly answer: WireRouteAnswer;
}

interface PendingFrozen {
  readonly phase: string;
  readonly t: number;
  readonly router: string;
  readonly engine: EngineHandle;
  /** −1: a route candidate, backed by any rank. */
  readonly dpRank: number;
  readonly promptIndex: number;
  readonly hitTokens: number;
  readonly incarnation: string | null;
}

const HISTORY_MS = 15000;

/** Tokens of the prompt resident on `rank` (−1: the best rank). */
function resident(a: WireResidencyAnswer, rank: number, promptIndex: number): number {
  let best = 0;
  for (const r of a.ranks) {
    if (rank !== -1 && r.dp_rank !== rank) continue;
    const p = r.prompts[promptIndex];
    if (p !== undefined) best = Math.max(best, p.device_hit_tokens + p.host_only_hit_tokens);
  }
  return best;
}

export class CreditMonitor {
  readonly byPhase = new Map<string, PhaseCredit>();
  /** Prompts every round reads and queries; append-only (indexes are kept in reads). */
  readonly prompts: number[][] = [];
  private readonly history = new Map<EngineHandle, Read[]>();
  private readonly lastAnswer = new Map<EngineHandle, WireResidencyAnswer>();
  private readonly pendingFrozen: PendingFrozen[] = [];
  private pendingRoutes: PendingRoute[] = [];
  /** Watched prompts by the caller's array, so a route answer finds its prompt's index. */
  private readonly indexOf = new Map<readonly number[], number>();
  private running = false;
  private loopDone: Promise<void> = Promise.resolve();
  private next = 0;
  rounds = 0;

  constructor(
    private readonly cluster: ChaosCluster,
    private readonly phase: () => string,
    private readonly graceMs: number,
  ) {}

  watch(prompts: readonly (readonly number[])[]): void {
    for (const p of prompts) {
      this.indexOf.set(p, this.prompts.length);
      this.prompts.push([...p]);
    }
  }

  /** A `POST /v1/route` answer to check once the engines have been read again. */
  routeAnswer(qs: number, router: string, prompt: readonly number[], answer: unknown): void {
    const promptIndex = this.indexOf.get(prompt);
    if (promptIndex === undefined || typeof answer !== 'object' || answer === null) return;
    this.pendingRoutes.push({ qs, phase: this.phase(), router, promptIndex, answer: answer as WireRouteAnswer });
  }

  stats(phase: string): PhaseCredit {
    let s = this.byPhase.get(phase);
    if (s === undefined) {
      s = { checks: 0, creditedHits: 0, maxLagMs: 0, stale: [], frozenCredit: 0, queryFailures: 0 };
      this.byPhase.set(phase, s);
    }
    return s;
  }

  start(): void {
    this.running = true;
    this.loopDone = this.loop();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loopDone;
  }

  private async loop(): Promise<void> {
    let pending: { qs: number; phase: string; promptIndex: number; answers: { router: string; q: QueryResult | null }[] } | null = null;
    while (this.running) {
      const routes = this.pendingRoutes;
      this.pendingRoutes = [];
      await this.readEngines();
      if (pending !== null) this.judge(pending.qs, pending.phase, pending.promptIndex, pending.answers);
      for (const r of routes) this.judgeRoute(r);
      const promptIndex = this.next++ % this.prompts.length;
      const qs = Date.now();
      const phase = this.phase();
      const answers = await Promise.all(this.cluster.routers.map(async (r) => ({ router: r.name, q: r.proc.isRunning ? await this.cluster.query(r, this.prompts[promptIndex]!) : null })));
      pending = { qs, phase, promptIndex, answers };
      this.rounds++;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private async readEngines(): Promise<void> {
    const prompts = this.prompts;
    await Promise.all(
      this.cluster.engines.map(async (e) => {
        const frozen = e.paused;
        const answer = frozen ? null : await this.cluster.residency(e, prompts);
        const t = Date.now();
        let h = this.history.get(e);
        if (h === undefined) this.history.set(e, (h = []));
        h.push({ t, answer, frozen });
        while (h.length > 0 && h[0]!.t < t - HISTORY_MS) h.shift();
        if (answer !== null) {
          this.settleFrozen(e, answer);
          this.lastAnswer.set(e, answer);
        }
      }),
    );
  }

  private judge(qs: number, phase: string, promptIndex: number, answers: readonly { router: string; q: QueryResult | null }[]): void {
    const s = this.stats(phase);
    for (const { router, q } of answers) {
      if (q === null) {
        s.queryFailures++;
        continue;
      }
      s.checks++;
      for (const m of q.matches) {
        const hit = m.device_hit_tokens + m.host_only_hit_tokens;
        if (hit === 0) continue;
        s.creditedHits++;
        const engine = this.cluster.engines.find((e) => e.name === m.instance_name);
        const sample = { t: qs, phase, router, engine: m.instance_name, dpRank: m.dp_rank, hitTokens: hit, synchronized: m.synchronized };
        if (!m.synchronized || engine === undefined) {
          s.stale.push({ ...sample, backedTokens: -1 });
          continue;
        }
        this.check(s, sample, engine, promptIndex, null);
      }
    }
  }

  private judgeRoute(p: PendingRoute): void {
    const s = this.stats(p.phase);
    s.checks++;
    for (const c of p.answer.candidates ?? []) {
      const hit = c.device_hit_tokens + c.host_only_hit_tokens;
      if (hit === 0) continue;
      s.creditedHits++;
      const engine = this.cluster.engines.find((e) => e.name === c.instance_name);
      const sample = { t: p.qs, phase: p.phase, router: `${p.router} /v1/route`, engine: c.instance_name, dpRank: -1, hitTokens: hit, synchronized: true };
      if (engine === undefined) s.stale.push({ ...sample, backedTokens: -1 });
      else this.check(s, sample, engine, p.promptIndex, c.incarnation_id ?? null);
    }
  }

  /**
   * Backed when a read of `engine` in [t − grace, now] (of `incarnation`, when given) holds at
   * least the hit; a stopped engine's credits wait for its first read after SIGCONT.
   */
  private check(s: PhaseCredit, sample: Omit<StaleSample, 'backedTokens'>, engine: EngineHandle, promptIndex: number, incarnation: string | null): void {
    let best = -1;
    let sawFrozen = false;
    let lastBackingT = -1;
    let latestBacks = false;
    for (const r of this.history.get(engine) ?? []) {
      if (r.t < sample.t - this.graceMs) continue;
      if (r.frozen) sawFrozen = true;
      const held = r.answer !== null && (incarnation === null || r.answer.incarnation_id === incarnation) ? resident(r.answer, sample.dpRank, promptIndex) : -1;
      best = Math.max(best, held);
      latestBacks = held >= sample.hitTokens;
      if (latestBacks) lastBackingT = r.t;
    }
    if (best >= sample.hitTokens) {
      if (!latestBacks && !sawFrozen) s.maxLagMs = Math.max(s.maxLagMs, sample.t - lastBackingT);
      return;
    }
    if (sawFrozen) {
      const frozenIncarnation = this.lastAnswer.get(engine)?.incarnation_id ?? null;
      this.pendingFrozen.push({ ...sample, engine, promptIndex, incarnation: incarnation ?? frozenIncarnation });
      return;
    }
    s.stale.push({ ...sample, backedTokens: best });
  }

  /** A resumed engine's first read decides the credits given while it was stopped. */
  private settleFrozen(e: EngineHandle, answer: WireResidencyAnswer): void {
    for (let i = this.pendingFrozen.length - 1; i >= 0; i--) {
      const p = this.pendingFrozen[i]!;
      if (p.engine !== e) continue;
      this.pendingFrozen.splice(i, 1);
      const s = this.stats(p.phase);
      const backed = p.incarnation === answer.incarnation_id ? resident(answer, p.dpRank, p.promptIndex) : 0;
      if (backed >= p.hitTokens) s.frozenCredit++;
      else s.stale.push({ t: p.t, phase: p.phase, router: p.router, engine: e.name, dpRank: p.dpRank, hitTokens: p.hitTokens, synchronized: true, backedTokens: backed });
    }
  }

  /** Distinct wall-clock seconds with at least one stale sample. */
  static staleSeconds(stale: readonly StaleSample[]): number {
    return new Set(stale.map((x) => Math.floor(x.t / 1000))).size;
  }
}
