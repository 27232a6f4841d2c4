// architecture.md "The view stream" with several streams coming and going: three simulated
// engines (each a BlockPool behind a real RankPublisher, faults injected per engine) while the
// directory adds and removes their streams at random (Directory.addStream / removeStream, as
// discovery does). After EVERY update a real WatchView router applies, its model
// (test/helpers/view-model.ts) holds exactly the streams the directory served at that version,
// each with the directory's residency and state. Truth per version is recorded in the view
// publisher's encode hook, which runs synchronously inside the flush. Routers re-watch with resume
// or fresh now and then; a re-added stream is a new stream (new stream_id) in the view.
//
//   engine 0..2 ══ZMQ══▶ Directory (add/remove) ──▶ ViewPublisher ══gRPC══▶ ViewModel
//                              served indexes at flush ──truth(version)──▲ compared ─┘
//
// Default: FC_RUNS=4 runs of up to 30 steps; FC_RUNS / FC_SEED lengthen or reproduce a run.
import { expect } from 'chai';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { DEFAULT_STREAM_LIMITS } from '../../shared/config/kv-events-config.js';
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { Directory, type DirectoryStreamFactory } from '../../directory-svc/directory.js';
import { DirectoryGrpcServer } from '../../directory-svc/grpc/directory-grpc-server.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import { ViewPublisher } from '../../directory-svc/view/view-publisher.js';
import { protoViewUpdateEncoder } from '../../directory-svc/view/view-update-encoder.js';
import type { WireViewUpdate } from '../../directory-svc/view/view-wire.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import { envInt } from '../helpers/env-int.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { stableClock } from '../helpers/stream-harness.js';
import { CheckedWatch } from '../helpers/checked-watch.js';
import { connectKvDirectory } from '../helpers/kv-directory-client.js';
import { describeTruth, directoryTruth, routerTruth, truthEqual, type StreamTruth } from '../helpers/stream-truth.js';
import { ViewModel, type DecodedViewUpdate } from '../helpers/view-model.js';
import { BLOCK_SIZE, EngineHistory, REPLAY_TIMEOUT_MS, historyActionArb, poolShapeArb } from './engine-history.js';
import type { HistoryAction } from './engine-history.js';

const RUNS = envInt('FC_RUNS', 4);
const MAX_STEPS = envInt('FC_ACTIONS', 30);
const FC_SEED = process.env['FC_SEED'];
const ENGINES = 3;
const nameOf = (engine: number): string => `engine-${engine}:8000`;

interface KvViewClient extends grpc.Client {
  WatchView(req: { router_id: string; epoch: string; version: string }): grpc.ClientReadableStream<DecodedViewUpdate>;
}

type Step =
  | { readonly kind: 'engine'; readonly engine: number; readonly action: HistoryAction }
  | { readonly kind: 'add'; readonly engine: number }
  | { readonly kind: 'remove'; readonly engine: number }
  | { readonly kind: 'rewatch'; readonly resume: boolean };

const engineArb = fc.integer({ min: 0, max: ENGINES - 1 });
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 12, arbitrary: fc.record({ kind: fc.constant('engine' as const), engine: engineArb, action: historyActionArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('add' as const), engine: engineArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('remove' as const), engine: engineArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rewatch' as const), resume: fc.boolean() }) },
);
const scenarioArb = fc.record({
  pools: fc.array(poolShapeArb, { minLength: ENGINES, maxLength: ENGINES }),
  flushIntervalMs: fc.constantFrom(1, 10, 30),
  logMaxEntries: fc.constantFrom(3, 4096),
  steps: fc.array(stepArb, { minLength: 8, maxLength: MAX_STEPS }),
});

/** Every stream in the view at `version` against the directory's truth there, by instance name. */
function checkStreams(model: ViewModel, want: ReadonlyMap<string, StreamTruth>, version: number, body: DecodedViewUpdate['body']): string[] {
  const diffs: string[] = [];
  const got = new Map<string, StreamTruth>();
  for (const s of model.streams.values()) {
    if (got.has(s.state.instance_name)) diffs.push(`v${version}: ${s.state.instance_name} in the view twice`);
    got.set(s.state.instance_name, routerTruth(s));
  }
  for (const name of new Set([...got.keys(), ...want.keys()])) {
    const g = got.get(name);
    const w = want.get(name);
    if (g === undefined || w === undefined || !truthEqual(g, w)) diffs.push(`v${version} (${body}) ${name}: router ${describeTruth(g)}; directory ${describeTruth(w)}`);
  }
  return diffs;
}

const coverage: Record<string, number> = {};
function count(key: string, n = 1): void {
  coverage[key] = (coverage[key] ?? 0) + n;
}

type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

async function run(sc: Scenario): Promise<void> {
  const closers: (() => Promise<void> | void)[] = [];
  try {
    const hasher = await ContentKeyHasher.forSeed(1024n);
    const engines: { pub: RankPublisher; history: EngineHistory }[] = [];
    for (let e = 0; e < ENGINES; e++) {
      const pub = await RankPublisher.start({ eventPort: await freePort(), replayPort: await freePort(), dpRank: 0, blockSize: BLOCK_SIZE, maxMessageBytes: 65_536 });
      closers.push(() => pub.close());
      const shape = sc.pools[e]!;
      const pool = EngineHistory.poolFor(shape);
      pub.setSnapshotSource(() => pool.snapshot());
      engines.push({ pub, history: new EngineHistory(pub, pool, hasher, shape.chunkBlocks) });
    }

    /** The subscribers the directory serves now, by instance name (the view's stream set). */
    const live = new Map<string, StreamSubscriber>();
    const truth = new Map<number, Map<string, StreamTruth>>();
    const violations: string[] = [];
    const baseEncode = protoViewUpdateEncoder();
    const encode = (u: WireViewUpdate): Buffer => {
      if (u.heartbeat === undefined) {
        const t = new Map<string, StreamTruth>();
        for (const [name, sub] of live) t.set(name, directoryTruth(sub));
        const before = truth.get(u.version);
        if (before !== undefined) {
          for (const name of new Set([...before.keys(), ...t.keys()])) {
            const a = before.get(name);
            const b = t.get(name);
            if (a === undefined || b === undefined || !truthEqual(a, b)) violations.push(`directory: version ${u.version} encoded twice with different views of ${name}`);
          }
        } else truth.set(u.version, t);
      }
      return baseEncode(u);
    };
    const view = new ViewPublisher({ flushIntervalMs: sc.flushIntervalMs, logMaxEntries: sc.logMaxEntries, encode });
    closers.push(() => view.close());
    const factory: DirectoryStreamFactory = async (cfg, limits) => {
      const sub = await StreamSubscriber.create(cfg, limits, { random: () => 0, nowMs: stableClock() });
      // The Directory attaches it to the view right after this returns, before anything else runs.
      live.set(cfg.instanceName, sub);
      return sub;
    };
    const directory = new Directory({
      enabled: true,
      streamSource: 'static',
      maxStreams: ENGINES,
      limits: { ...DEFAULT_STREAM_LIMITS, replayTimeoutMs: REPLAY_TIMEOUT_MS, resyncIntervalMs: 0, maxBufferedBytes: 1 << 20 },
      createStream: factory,
      trackers: [view],
    });
    closers.push(() => directory.close());
    const add = async (e: number): Promise<void> => {
      if (live.has(nameOf(e))) return;
      const pub = engines[e]!.pub;
      await directory.addStream({ instanceName: nameOf(e), dpRank: 0, blockSize: BLOCK_SIZE, endpoint: pub.eventEndpoint, replayEndpoint: pub.replayEndpoint, topic: '', hashSeed: 1024n });
    };
    const remove = async (e: number): Promise<void> => {
      if (!live.has(nameOf(e))) return;
      // removeStream takes the stream out of the view synchronously (before its first await).
      const removing = directory.removeStream(nameOf(e), 0);
      live.delete(nameOf(e));
      await removing;
    };
    await add(0);
    const server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory, view });
    closers.push(() => server.close(500));
    const client = connectKvDirectory<KvViewClient>(server.port);
    closers.push(() => client.close());

    let watchNo = 0;
    const open = (from: ViewModel | null): CheckedWatch<ReadonlyMap<string, StreamTruth>> => {
      const call = client.WatchView({ router_id: `router-streams-${watchNo}`, epoch: from?.epoch ?? '', version: String(from?.version ?? 0) });
      const w = new CheckedWatch(call, truth, violations, `watch ${watchNo++}`, checkStreams, from);
      closers.push(() => w.call.cancel());
      return w;
    };
    let watch = open(null);
    await waitFor(() => watch.updates > 0, 10_000, 'first update');

    for (const step of sc.steps) {
      switch (step.kind) {
        case 'engine': {
          const { history } = engines[step.engine]!;
          const sub = (): StreamSubscriber | undefined => live.get(nameOf(step.engine));
          const settle = async (): Promise<void> => {
            const target = history.lastSeq;
            await waitFor(() => sub() === undefined || (sub()!.state === 'SYNCHRONIZED' && sub()!.sequence === target), 2000, 'settle').catch(() => undefined);
          };
          await history.run(step.action, settle);
          break;
        }
        case 'add':
          count('adds', live.has(nameOf(step.engine)) ? 0 : 1);
          await add(step.engine);
          break;
        case 'remove':
          count('removes', live.has(nameOf(step.engine)) ? 1 : 0);
          await remove(step.engine);
          break;
        case 'rewatch': {
          const old = watch;
          old.call.cancel();
          await waitFor(() => view.watcherCount === 0, 5000, 'watcher gone');
          view.flush();
          watch = open(step.resume ? old.model : null);
          const w = watch;
          await waitFor(() => w.updates > 0, 10_000, 'first update of the new watch');
          count(step.resume ? 'resumes' : 'fresh_watches');
          break;
        }
      }
    }

    for (const { history } of engines) {
      await history.endFaults();
      await history.publish([]);
    }
    for (const [e, { history }] of engines.entries()) {
      const sub = live.get(nameOf(e));
      if (sub === undefined) continue;
      const last = history.lastSeq;
      await waitFor(() => sub.state === 'SYNCHRONIZED' && sub.sequence === last, 30_000, `${nameOf(e)} SYNCHRONIZED at ${last}`);
    }
    view.flush();
    await waitFor(() => watch.model.version === view.version, 10_000, `router at version ${view.version}`);
    expect(violations, `violations\nsteps: ${sc.steps.map((s) => JSON.stringify(s)).join(' ')}`).to.deep.equal([]);
    const names = [...watch.model.streams.values()].map((s) => s.state.instance_name).sort();
    expect(names, 'streams in the router view').to.deep.equal([...live.keys()].sort());
    for (const [e, { history }] of engines.entries()) {
      const s = watch.model.streamByName(nameOf(e), 0);
      if (s === null) continue;
      expect(history.residencyMismatches(history.epoch, history.lastSeq, s.residency), `${nameOf(e)}: router residency vs engine truth`).to.deep.equal([]);
    }
    count('runs');
    count('versions', view.version);
    count('watches', watchNo);
  } finally {
    for (const close of closers.reverse()) await close();
  }
}

describe('architecture.md view stream properties: streams added and removed under a watching router', function () {
  this.timeout(Math.max(120_000, RUNS * 60_000));

  it(`the router holds exactly the directory's streams, each with its residency, at every version it reports (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (sc) => run(sc)),
      { numRuns: RUNS, ...(FC_SEED !== undefined && FC_SEED !== '' ? { seed: Number(FC_SEED) } : {}), endOnFailure: true },
    );
    console.log(`      coverage ${JSON.stringify(coverage)}`);
  });
});
