/**
 * The simulated engine as the chaos and soak suites run it: exactly tools/engine-sim/cli.ts (same
 * flags, same parts: EngineSimulator, RankDispatcher, OpenAiEndpoint, EngineControl) plus two
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
 * A copy rather than a flag in cli.ts so the chaos suite needs no change to the simulator; the
 * routes are the only difference, and only tests call them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isConfigError } from '../../shared/config/config-error.js';
import { createLogger } from '../../shared/log/logger.js';
import { EngineControl } from '../../tools/engine-sim/engine-control.js';
import { EngineSimulator } from '../../tools/engine-sim/engine-simulator.js';
import { engineSimHelp, parseEngineSimArgs, type EngineSimConfig } from '../../tools/engine-sim/engine-sim-flags.js';
import { OpenAiEndpoint } from '../../tools/engine-sim/openai-server.js';
import { RankDispatcher } from '../../tools/engine-sim/rank-dispatcher.js';
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
        if ((tiers & 1) !== 0) device++;
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

async function start(cfg: EngineSimConfig): Promise<() => Promise<void>> {
  const log = createLogger('engine-sim', cfg.logLevel);
  const sim = await EngineSimulator.start({
    instanceName: cfg.instanceName,
    dpSize: cfg.dpSize,
    blockSize: cfg.blockSize,
    eventPortBase: cfg.eventPortBase,
    replayPortBase: cfg.replayPortBase,
    topic: cfg.topic,
    deviceCapacityBlocks: cfg.deviceCapacityBlocks,
    hostCapacityBlocks: cfg.hostCapacityBlocks,
    host: cfg.host,
    maxMessageBytes: cfg.maxMessageBytes,
    offloadMode: cfg.offloadMode,
    logger: log,
  });
  const dispatcher = new RankDispatcher(sim, cfg.deviceCapacityBlocks, cfg.dropEveryNBatches);
  const endpoint = new OpenAiEndpoint({ engine: dispatcher, tokenIntervalMs: cfg.tokenIntervalMs, logger: log.child({ component: 'openai' }) });
  let incarnation = '';
  const routes = {
    handle(req: IncomingMessage, res: ServerResponse): boolean {
      const path = (req.url ?? '').split('?', 1)[0];
      if (req.method === 'POST' && path === RESIDENCY_PATH) {
        void readJson(req)
          .then((body) => {
            const prompts = (body as { prompts?: unknown }).prompts;
            if (!Array.isArray(prompts) || !prompts.every((p) => Array.isArray(p))) return send(res, 400, { error: 'prompts must be an array of token id arrays' });
            send(res, 200, residency(sim, prompts as number[][], incarnation));
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
      return endpoint.handle(req, res);
    },
  };
  const control = await EngineControl.start({
    etcdHosts: cfg.etcdHosts,
    etcdNamespace: cfg.etcdNamespace,
    host: cfg.host,
    httpPort: cfg.httpPort,
    type: cfg.type,
    dpSize: cfg.dpSize,
    directoryUrl: cfg.directoryUrl,
    internalApiToken: cfg.internalApiToken,
    heartbeatIntervalMs: cfg.heartbeatIntervalMs,
    leaseTtlS: cfg.leaseTtlS,
    currentRole: cfg.currentRole,
    incarnationId: cfg.incarnationId ?? undefined,
    httpRoutes: routes,
    logger: log.child({ component: 'control' }),
  });
  incarnation = control.incarnationId;
  const refreshLoad = (): void => control.setLoad(dispatcher.load());
  endpoint.on('request', () => {
    dispatcher.requestStarted();
    refreshLoad();
  });
  for (const ended of ['complete', 'abort'] as const) {
    endpoint.on(ended, () => {
      dispatcher.requestEnded();
      refreshLoad();
    });
  }
  refreshLoad();
  log.info({ instance: cfg.instanceName, incarnation_id: incarnation, dp_size: cfg.dpSize }, 'engine simulator ready');
  return async () => {
    await control.close();
    await sim.close();
  };
}

async function main(): Promise<void> {
  let cfg: EngineSimConfig | 'help';
  try {
    cfg = parseEngineSimArgs(process.argv.slice(2));
  } catch (e) {
    if (!isConfigError(e)) throw e;
    console.error(e.message);
    process.exit(2);
  }
  if (cfg === 'help') {
    process.stdout.write(engineSimHelp());
    return;
  }
  const stop = await start(cfg);
  const onSignal = (): void => {
    setTimeout(() => process.exit(1), 5000).unref();
    void stop().finally(() => process.exit(0));
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
}

void main().catch((e: unknown) => {
  console.error(`chaos engine: start failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
