/**
 * An engines-file engine whose KV events the test writes: event shapes the simulator never
 * publishes (multimodal items, prompt embeddings, SGLang salts, `locality: "REMOTE"`, a `lora_id`
 * without a name; cache-identity §4). A simulated engine process of the same kind answers the
 * directory's `GET /health`, `/metrics` and `/v1/models` on its HTTP port, and the engines-file
 * entry points the stream at a RankPublisher in the test process instead of the simulator's own
 * sockets (the simulator runs with `--no_kv_event_sources`, so its own ports never win, engines.md §6).
 *
 *   directory-svc ──GET /health, /metrics, /v1/models──▶ SimProcess (front)
 *        └──SUB / DEALER (ZeroMQ)──▶ RankPublisher (this process: publish(), history replay)
 */
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import { FLEET_BLOCK_SIZE, SimProcess } from './engines-fleet.js';
import { freePortRange } from './ports.js';

export class ScriptedEngine {
  private constructor(
    readonly front: SimProcess,
    readonly publisher: RankPublisher,
  ) {}

  /** `servedModels`: the front's `--served_models` (what its `/v1/models` lists). */
  static async start(name: string, opts: { kind: 'vllm' | 'sglang'; servedModels: string }): Promise<ScriptedEngine> {
    const port = await freePortRange(2);
    const publisher = await RankPublisher.start({ eventPort: port, replayPort: port + 1, dpRank: 0, blockSize: FLEET_BLOCK_SIZE, engineKind: opts.kind });
    try {
      const front = await SimProcess.start(name, { kind: opts.kind, args: ['--no_kv_event_sources', `--served_models=${opts.servedModels}`] });
      return new ScriptedEngine(front, publisher);
    } catch (e) {
      await publisher.close();
      throw e;
    }
  }

  get name(): string {
    return this.front.name;
  }

  /** Its engines-file entry: the front's url, this process's event and replay endpoints. */
  entry(over: Record<string, unknown> = {}): Record<string, unknown> {
    return this.front.entry({ event_endpoint: this.publisher.eventEndpoint, replay_endpoint: this.publisher.replayEndpoint, ...over });
  }

  /** One batch, as the engine would send it (history replay repairs a batch the SUB missed). */
  publish(events: readonly WireEvent[]): Promise<bigint> {
    return this.publisher.publish(events);
  }

  async close(): Promise<void> {
    await this.front.proc.stop();
    await this.publisher.close();
  }
}
