// architecture.md "The view stream" as a property over random faulty engine histories: a real
// grpc-js WatchView client applies snapshot + ordered deltas to the router-side model
// (test/helpers/view-model.ts), and after EVERY update it reports, the model equals the
// directory's residency at that version. The directory's truth per version is recorded where the
// update is encoded (ViewPublisher's `encode` hook runs synchronously inside the flush, so the
// subscriber's served index at that moment IS the view at that version). Watches are forced to
// end and re-watch with resume (epoch, version) — falling back to a snapshot when the change log no
// longer holds the version, or for a stale epoch — and the resumed model must stay equal.
//
//   BlockPool → RankPublisher ══ZMQ══▶ StreamSubscriber (Directory) ──▶ ViewPublisher ══gRPC══▶ ViewModel
//                                          served index at flush ──truth(version)──▲ compared ─┘
//
// Default: FC_RUNS=5 runs of up to 24 actions; FC_RUNS / FC_SEED lengthen or reproduce a run.
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
import { ViewModel, residencyMap, type DecodedViewUpdate } from '../helpers/view-model.js';
import { BLOCK_SIZE, EngineHistory, REPLAY_TIMEOUT_MS, historyScenarioArb } from './engine-history.js';
import type { HistoryScenario } from './engine-history.js';

const RUNS = envInt('FC_RUNS', 5);
const MAX_ACTIONS = envInt('FC_ACTIONS', 24);
const FC_SEED = process.env['FC_SEED'];
const INSTANCE = 'engine-a:8000';

interface KvViewClient extends grpc.Client {
  WatchView(req: { router_id: string; epoch: string; version: string }): grpc.ClientReadableStream<DecodedViewUpdate>;
}

type Rewatch = 'none' | 'resume' | 'stale-epoch' | 'fresh';

interface ViewScenario {
  readonly history: HistoryScenario;
  /** Change log bound: small ones turn resumes into snapshot fallbacks. */
  readonly logMaxEntries: number;
  readonly flushIntervalMs: number;
  /** Before action i, how the router re-watches (mostly not at all). */
  readonly rewatches: readonly Rewatch[];
}

const scenarioArb: fc.Arbitrary<ViewScenario> = fc.record({
  history: historyScenarioArb(MAX_ACTIONS),
  logMaxEntries: fc.constantFrom(2, 4, 4096),
  flushIntervalMs: fc.constantFrom(1, 10, 30),
  rewatches: fc.array(fc.constantFrom<Rewatch>('none', 'none', 'none', 'none', 'resume', 'resume', 'stale-epoch', 'fresh'), { minLength: MAX_ACTIONS, maxLength: MAX_ACTIONS }),
});

/** The single stream in the view at `version` against the directory's truth there. */
function checkStream(model: ViewModel, want: StreamTruth, version: number, body: DecodedViewUpdate['body']): string[] {
  const s = model.streamByName(INSTANCE, 0);
  if (s === null) return [`stream missing from the view at version ${version}`];
  const got = routerTruth(s);
  if (truthEqual(got, want)) return [];
  return [`view at version ${version} (${body}) differs: router ${describeTruth(got)}; directory ${describeTruth(want)}`];
}

const coverage: Record<string, number> = {};
function count(key: string, n = 1): void {
  coverage[key] = (coverage[key] ?? 0) + n;
}

async function runViewHistory(sc: ViewScenario, resyncIntervalMs: number): Promise<void> {
  const closers: (() => Promise<void> | void)[] = [];
  try {
    const pub = await RankPublisher.start({ eventPort: await freePort(), replayPort: await freePort(), dpRank: 0, blockSize: BLOCK_SIZE, maxMessageBytes: 65_536 });
    closers.push(() => pub.close());
    const truth = new Map<number, StreamTruth>();
    const violations: string[] = [];
    let sub: StreamSubscriber | null = null;
    const baseEncode = protoViewUpdateEncoder();
    // Runs inside flush()/snapshotBytes(), synchronously: the served index now is the view at u.version.
    const encode = (u: WireViewUpdate): Buffer => {
      if (u.heartbeat === undefined && sub !== null) {
        const t = directoryTruth(sub);
        const before = truth.get(u.version);
        // A snapshot at a version already published as a delta must describe the same view.
        if (before !== undefined && !truthEqual(before, t)) violations.push(`directory: version ${u.version} encoded twice with different views`);
        if (before === undefined) truth.set(u.version, t);
      }
      return baseEncode(u);
    };
    const view = new ViewPublisher({ flushIntervalMs: sc.flushIntervalMs, logMaxEntries: sc.logMaxEntries, encode });
    closers.push(() => view.close());
    const factory: DirectoryStreamFactory = async (cfg, limits) => {
      const s = await StreamSubscriber.create(cfg, limits, { random: () => 0, nowMs: stableClock() });
      sub = s;
      return s;
    };
    const directory = new Directory({
      enabled: true,
      streamSource: 'static',
      maxStreams: 4,
      limits: { ...DEFAULT_STREAM_LIMITS, replayTimeoutMs: REPLAY_TIMEOUT_MS, resyncIntervalMs, maxBufferedBytes: 1 << 20 },
      createStream: factory,
      trackers: [view],
    });
    closers.push(() => directory.close());
    await directory.addStream({ instanceName: INSTANCE, dpRank: 0, blockSize: BLOCK_SIZE, endpoint: pub.eventEndpoint, replayEndpoint: pub.replayEndpoint, topic: '', hashSeed: 1024n });
    const server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory, view });
    closers.push(() => server.close(500));
    const client = connectKvDirectory<KvViewClient>(server.port);
    closers.push(() => client.close());
    const stream = (): StreamSubscriber => sub as unknown as StreamSubscriber;
    await waitFor(() => sub !== null && stream().state === 'SYNCHRONIZED', 10_000, 'stream synchronized');
    await pub.waitForSubscribers(1);

    const pool = EngineHistory.poolFor(sc.history);
    const hasher = await ContentKeyHasher.forSeed(1024n);
    const history = new EngineHistory(pub, pool, hasher, sc.history.chunkBlocks);
    pub.setSnapshotSource(() => pool.snapshot());

    let watchNo = 0;
    const open = (epoch: string, version: number, from: ViewModel | null): CheckedWatch<StreamTruth> => {
      const call = client.WatchView({ router_id: `router-prop-${watchNo}`, epoch, version: String(version) });
      const w = new CheckedWatch(call, truth, violations, `watch ${watchNo++}`, checkStream, from);
      closers.push(() => w.call.cancel());
      return w;
    };
    let watch = open('', 0, null);
    await waitFor(() => watch.model.snapshots === 1, 10_000, 'first snapshot');

    const settle = async (): Promise<void> => {
      const target = history.lastSeq;
      await waitFor(() => stream().state === 'SYNCHRONIZED' && stream().sequence === target, 2000, 'settle').catch(() => undefined);
    };
    for (let i = 0; i < sc.history.actions.length; i++) {
      const rewatch = sc.rewatches[i] ?? 'none';
      if (rewatch !== 'none') {
        count(`rewatch_${rewatch}`);
        const old = watch;
        old.call.cancel();
        await waitFor(() => view.watcherCount === 0, 5000, `watcher gone (now ${view.watcherCount})`);
        // Let some deltas go by unseen, so a resume has something to catch up on (and, past the
        // change log's bound, gets a snapshot instead).
        const unseen = 1 + (i % 4);
        for (let k = 0; k < unseen && i < sc.history.actions.length; k++, i++) {
          await history.run(sc.history.actions[i]!, settle);
          view.flush();
        }
        i--;
        if (rewatch === 'resume') watch = open(old.model.epoch, old.model.version, old.model);
        else if (rewatch === 'stale-epoch') watch = open('an-epoch-of-another-directory', old.model.version, null);
        else watch = open('', 0, null);
        // The call is established once something arrives (a snapshot, a delta or a heartbeat); only
        // then does a cancel reach the directory.
        const w = watch;
        await waitFor(() => w.updates > 0, 10_000, 'first update of the new watch');
        if (rewatch === 'resume' && w.model.snapshots > 0) count('resume_fell_back_to_snapshot');
        continue;
      }
      await history.run(sc.history.actions[i]!, settle);
    }

    await history.endFaults();
    if (resyncIntervalMs === 0) await history.publish([]);
    const lastSeq = history.lastSeq;
    await waitFor(() => stream().state === 'SYNCHRONIZED' && stream().sequence === lastSeq, 30_000, `SYNCHRONIZED at ${lastSeq}`);
    view.flush();
    await waitFor(() => watch.model.version === view.version, 10_000, `router at version ${view.version}`);
    const report = `\nactions: ${history.log.join(' ')}\nreplies: ${history.replies.join(' ')}`;
    expect(violations, `violations${report}`).to.deep.equal([]);
    // End to end: the router's residency is the engine's true residency.
    const routed = watch.model.streamByName(INSTANCE, 0);
    expect(routed, 'stream in the router view').to.not.equal(null);
    expect(routed!.residency).to.deep.equal(residencyMap(stream().index!.exportResidency()));
    expect(history.residencyMismatches(history.epoch, lastSeq, routed!.residency), `router residency vs engine truth${report}`).to.deep.equal([]);
    const stats = view.stats();
    count('runs');
    count('versions', view.version);
    count('snapshots_sent', stats.snapshotsSent);
    count('resumes', stats.resumes);
    count('lagging_ended', stats.laggingEnded);
    count('watches', watchNo);
    for (const [cls, n] of Object.entries(stream().counters.syncLost)) count(`sync_lost_${cls}`, n);
  } finally {
    for (const close of closers.reverse()) await close();
  }
}

describe('architecture.md view stream properties: a WatchView router over random faulty engine histories', function () {
  this.timeout(Math.max(120_000, RUNS * 60_000));

  it(`the router's view equals the directory's residency at every version it reports, across resumes and snapshot fallbacks (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, fc.constantFrom(0, 900), async (sc, resync) => runViewHistory(sc, resync)),
      { numRuns: RUNS, ...(FC_SEED !== undefined && FC_SEED !== '' ? { seed: Number(FC_SEED) } : {}), endOnFailure: true },
    );
    console.log(`      coverage ${JSON.stringify(coverage)}`);
  });
});
