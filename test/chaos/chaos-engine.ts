/**
 * The simulated engine as the chaos and soak suites run it: exactly tools/engine-sim/cli.ts (same
 * flags, same parts: EngineSimulator, RankDispatcher, OpenAiEndpoint, EngineControl, one module) plus two
 * test-only routes on its business HTTP port, so the suites can read the engine's true KV state
 * without changing it:
 *
 *   POST /v1/internal/sim/residency {"prompts":[[token ids], ...]}
 *     → {"incarnation_id", "ranks": [{"dp_rank", "device_blocks", "host_blocks",
 *        "prompts": [{"device_hit_tokens", "host_only_hit_tokens"}, ...]}]}
 *     Per rank and prompt: the prefix of complete blocks resident in the rank's BlockPool, read
 *     with kv-events §8's rules (walk from block 0, stop at the first block on no tier; a block on
 *     both tiers counts as Device). Read-only: no LRU touch, no event.
 *   POST /v1/internal/sim/clear → every rank publishes AllBlocksCleared (§11.7) and empties its pool.
 *
 * The engine itself is tools/engine-sim/engine-process.ts (the same code as cli.ts); the routes are
 * the only difference, added through its `wrapRoutes` hook, and only tests call them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { TIER_DEVICE } from '../../shared/keys/tier-bits.js';
import type { EngineSimulator } from '../../tools/engine-sim/engine-simulator.js';
import { runEngineProcess, type EngineRoutesContext } from '../../tools/engine-sim/engine-process.js';
import type { EngineHttpRoutes } from '../../tools/engine-sim/engine-control.js';
import { CLEAR_PATH, RESIDENCY_PATH, type WirePromptResidency, type WireRankResidency, type WireResidencyAnswer } from './engine-residency.js';

function residency(sim: EngineSimulator, prompts: readonly (readonly number[])[], incarnationId: string): WireResidencyAnswer {
  const ranks: WireRankResidency[] = [];
  for (let r = 0; r < sim.dpSize; r++) {
    const pool = sim.rank(r).pool;
    const answers: WirePromptResidency[] = [];
    for (const tokens of prompts) {
      let device = 0;
      let hostOnly = 0;
      for (const hash of pool.hashesOf(tokens)) {
        const tiers = pool.tiersOf(hash);
        if (tiers === 0) break;
        if ((tiers & TIER_DEVICE) !== 0) device++;
        else hostOnly++;
      }
      answers.push({ device_hit_tokens: device * pool.blockSize, host_only_hit_tokens: hostOnly * pool.blockSize });
    }
    ranks.push({ dp_rank: r, device_blocks: pool.deviceBlocks, host_blocks: pool.hostBlocks, prompts: answers });
  }
  return { incarnation_id: incarnationId, ranks };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? {} : (JSON.parse(text) as unknown);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}

/** The two test-only routes in front of the engine's own (OpenAI) routes. */
function chaosRoutes({ sim, incarnationId, inner }: EngineRoutesContext): EngineHttpRoutes {
  return {
    handle(req: IncomingMessage, res: ServerResponse): boolean {
      const path = (req.url ?? '').split('?', 1)[0];
      if (req.method === 'POST' && path === RESIDENCY_PATH) {
        void readJson(req)
          .then((body) => {
            const prompts = (body as { prompts?: unknown }).prompts;
            if (!Array.isArray(prompts) || !prompts.every((p) => Array.isArray(p))) return send(res, 400, { error: 'prompts must be an array of token id arrays' });
            send(res, 200, residency(sim, prompts as number[][], incarnationId()));
          })
          .catch(() => send(res, 400, { error: 'body is not JSON' }));
        return true;
      }
      if (req.method === 'POST' && path === CLEAR_PATH) {
        void Promise.all(Array.from({ length: sim.dpSize }, (_, r) => sim.rank(r).clear(null))).then(
          () => send(res, 200, { ok: true }),
          (e: unknown) => send(res, 500, { error: e instanceof Error ? e.message : String(e) }),
        );
        return true;
      }
      return inner.handle(req, res);
    },
  };
}

void runEngineProcess({ wrapRoutes: chaosRoutes });
