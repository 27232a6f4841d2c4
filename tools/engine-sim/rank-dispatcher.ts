/**
 * The engine's DP dispatcher as the CLI's OpenAI endpoint sees it: each request's prefill goes to
 * the next rank in turn (the engine, not the router, picks the rank: routing.md), and with
 * `dropEveryNBatches = n > 0` every n-th event batch of a rank takes its seq but is never sent
 * (kv-events §7.1: the subscriber sees a gap and recovers from the snapshot, which stays truthful
 * because the pool did change). Also reports the load a heartbeat carries.
 */
import type { AdmitOptions } from './block-pool.js';
import type { EngineSimulator } from './engine-simulator.js';
import type { PromptAdmitter } from './openai-server.js';

export class RankDispatcher implements PromptAdmitter {
  readonly blockSize: number;
  private nextRank = 0;
  /** Batches each rank has published through this dispatcher (dropped ones included). */
  private readonly batches: number[];
  /** Requests admitted and not yet answered (the heartbeat's waiting_requests_num). */
  private inFlight = 0;

  constructor(
    private readonly sim: EngineSimulator,
    private readonly deviceCapacityBlocks: number,
    private readonly dropEveryNBatches: number,
  ) {
    this.blockSize = sim.blockSize;
    this.batches = new Array<number>(sim.dpSize).fill(0);
  }

  async admitPrompt(tokenIds: readonly number[], identity: AdmitOptions = {}): Promise<{ hitBlocks: number; hostHitBlocks: number }> {
    const r = this.nextRank;
    this.nextRank = (r + 1) % this.sim.dpSize;
    const rank = this.sim.rank(r);
    const n = this.dropEveryNBatches;
    // The flag stays armed until a batch goes out, so a step that publishes nothing (prompt fully
    // resident) moves the drop to the next step rather than losing it.
    if (n > 0 && (this.batches[r]! + 1) % n === 0) rank.publisher.dropNextBatch();
    const step = await rank.admitPrompt(tokenIds, identity);
    this.batches[r]! += step.seqs.length;
    return step;
  }

  /** Every rank's cache emptied and announced as `[AllBlocksCleared]` (kv-events §7.3 full-state batch). */
  async resetPrefixCache(): Promise<void> {
    for (let r = 0; r < this.sim.dpSize; r++) await this.sim.rank(r).clear(null);
  }

  requestStarted(): void {
    this.inFlight++;
  }

  requestEnded(): void {
    if (this.inFlight > 0) this.inFlight--;
  }

  /** Device occupancy of each rank's own pool, 0..1 (one `/metrics` label set per rank). */
  cacheUsageByRank(): number[] {
    const out: number[] = [];
    for (let r = 0; r < this.sim.dpSize; r++) out.push(Math.min(1, this.sim.rank(r).pool.deviceBlocks / this.deviceCapacityBlocks));
    return out;
  }

  /** discovery.md heartbeat load: queue length and Device occupancy over all ranks. */
  load(): { waiting_requests_num: number; gpu_cache_usage_perc: number } {
    let device = 0;
    for (let r = 0; r < this.sim.dpSize; r++) device += this.sim.rank(r).pool.deviceBlocks;
    const usage = device / (this.deviceCapacityBlocks * this.sim.dpSize);
    return { waiting_requests_num: this.inFlight, gpu_cache_usage_perc: Math.min(1, Math.max(0, usage)) };
  }
}
