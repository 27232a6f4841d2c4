// engines.md §6 conformance scenarios E1–E10, E13, E14 for vllm/sglang streams: the stream
// subscriber against the engine simulator's rank publisher in its vLLM/SGLang modes (history
// ring, both reply layouts, no replay endpoint, map/array batches, omitted dp rank) over real
// TCP ZeroMQ on free ports.
//
//   StreamSubscriber SUB  ◀──[topic, seq, batch]──  XPUB  RankPublisher (vllm|sglang)
//   StreamSubscriber DEALER ──["", start_seq]──▶ ROUTER
//                           ◀──["", (topic,) seq, payload]… terminator──   (history, not a snapshot)
//
// Every rig samples its view on each state and view event; closeAll checks no index was ever
// visible outside SYNCHRONIZED. No timing assertions: waits are on states, counters and requests.
import { expect } from 'chai';
import type { EngineKind } from '../../shared/config/engine-kind.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import type { EngineIdentitySource } from '../../directory-svc/engines/engine-identity.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import { WireEncoder } from '../../tools/engine-sim/wire-encoding.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { BASE_LIMITS, OpenRigs, StreamRig, blockTokens, chainTokens, cleared, stored } from '../helpers/stream-harness.js';
import type { StreamRigOptions } from '../helpers/stream-harness.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

/** Batch i of one chain: block 100+i on 100+i−1 (nil parent for batch 0), tokens of block i. */
function chainBatch(i: number): WireEvent[] {
  return [stored([100 + i], i === 0 ? null : 99 + i, blockTokens(i))];
}

/** Publishes chain batches from..to−1 (a publisher with no subscriber yet only buffers them). */
async function publishChain(r: StreamRig, from: number, to: number): Promise<void> {
  for (let i = from; i < to; i++) await r.pub.publish(chainBatch(i));
}

const KINDS: { kind: EngineKind; layout: 2 | 3; encoding: 'array' | 'map' }[] = [
  { kind: 'vllm', layout: 3, encoding: 'map' },
  { kind: 'vllm', layout: 2, encoding: 'array' },
  { kind: 'sglang', layout: 2, encoding: 'array' },
];

describe('engines.md §3 history replay (E1–E10, E13, E14) over real ZeroMQ', function () {
  this.timeout(30_000);
  const rigs = new OpenRigs();
  afterEach(() => rigs.closeAll());

  const open = (k: (typeof KINDS)[number], extra: StreamRigOptions = {}): Promise<StreamRig> =>
    rigs.open({ engineKind: k.kind, replayLayout: k.layout, batchForm: { encoding: k.encoding, omitDpRank: false }, ...extra });

  for (const k of KINDS) {
    const name = `${k.kind}, layout ${k.layout}, ${k.encoding} batches`;

    it(`E1 first connect, empty history → SYNCHRONIZED empty (${name})`, async () => {
      const r = await open(k);
      await r.startSynchronized();
      expect(r.sub.sequence).to.equal(-1n);
      expect(r.pub.snapshotRequests).to.deep.equal([0n]);
      expect(r.query(chainTokens(0, 2)).reusable_prefix_tokens).to.equal(0);
      await r.apply(chainBatch(0));
      expect(r.hits(chainTokens(0, 1))).to.equal(1);
    });

    it(`E2 first connect, history from 0 plus an overlapping live suffix → exact state (${name})`, async () => {
      const r = await open(k, { limits: { replayTimeoutMs: 3000 } });
      await publishChain(r, 0, 5);
      // Hold the reply so live batches 5, 6 are buffered AND in the history it finally sends.
      r.pub.snapshotFaults.delayMs = 400;
      r.sub.start();
      await waitFor(() => r.pub.snapshotRequests.length === 1, 5000, 'history request');
      await r.pub.waitForSubscribers(1);
      await publishChain(r, 5, 7);
      await r.atSequence(6n);
      expect(r.hits(chainTokens(0, 8))).to.equal(7);
      expect(r.sub.counters.batchesApplied).to.equal(7);
      expect(r.sub.counters.recoveriesOk).to.equal(1);
    });
  }

  it('E3 first connect, history rotated → history_lost with zero hits, no retry storm; a full-state batch restores', async () => {
    const r = await rigs.open({ engineKind: 'vllm', replayBufferSteps: 3 });
    await publishChain(r, 0, 6);
    r.sub.start();
    await r.inState('UNSYNCHRONIZED');
    await r.pub.waitForSubscribers(1);
    expect(r.sub.error).to.equal('history_lost: replay starts at 3, needed 0; waiting for a full-state batch');
    expect(r.query(chainTokens(0, 6)).reusable_prefix_tokens).to.equal(0);
    // A live batch that is not a full-state batch changes nothing.
    await r.pub.publish(chainBatch(6));
    // The engine resets its prefix cache: [AllBlocksCleared] is a full-state batch (kv-events §7.3).
    const seq = await r.pub.publish([cleared(null), stored([500], null, blockTokens(50))]);
    await r.atSequence(seq);
    expect(r.sub.counters.restores).to.equal(1);
    expect(r.hits(blockTokens(50))).to.equal(1);
    expect(r.hits(chainTokens(0, 6))).to.equal(0);
    // history_lost retries at most every resync_interval_ms (30 s when 0): one request only.
    expect(r.pub.snapshotRequests).to.deep.equal([0n]);
  });

  it('E4 gap repaired from history without discarding the index', async () => {
    const r = await rigs.open({ engineKind: 'vllm', replayLayout: 3 });
    await r.startSynchronized();
    await publishChain(r, 0, 4);
    await r.atSequence(3n);
    const index = r.sub.index;
    r.pub.dropNextBatch();
    await r.pub.publish(chainBatch(4));
    await r.pub.publish(chainBatch(5));
    await r.atSequence(5n);
    expect(r.sub.index, 'the same index object, repaired in place').to.equal(index);
    expect(r.pub.snapshotRequests).to.deep.equal([0n, 4n]);
    expect(r.sub.counters.syncLost['gap']).to.equal(1);
    expect(r.hits(chainTokens(0, 6))).to.equal(6);
  });

  it('E5 gap beyond the buffer → history_lost, zero hits', async () => {
    const r = await rigs.open({ engineKind: 'sglang', replayBufferSteps: 2 });
    await r.startSynchronized();
    await publishChain(r, 0, 2);
    await r.atSequence(1n);
    for (let i = 2; i < 5; i++) {
      r.pub.dropNextBatch();
      await r.pub.publish(chainBatch(i));
    }
    await r.pub.publish(chainBatch(5));
    await r.inState('UNSYNCHRONIZED');
    expect(r.sub.error).to.equal('history_lost: replay starts at 4, needed 2; waiting for a full-state batch');
    expect(r.query(chainTokens(0, 6)).reusable_prefix_tokens).to.equal(0);
  });

  it('E6 seq reset → the new process\'s state only', async () => {
    const r = await rigs.open({ engineKind: 'vllm' });
    await r.startSynchronized();
    await publishChain(r, 0, 3);
    await r.atSequence(2n);
    // Same process behind the address, restarted without its cache: seq 0 again, new blocks.
    await r.pub.restart();
    await r.pub.waitForSubscribers(1);
    await r.pub.publish([stored([900], null, blockTokens(90))]);
    await r.pub.publish([stored([901], 900, blockTokens(91))]);
    await r.atSequence(1n);
    expect(r.hits(chainTokens(0, 3))).to.equal(0);
    expect(r.hits(chainTokens(90, 2))).to.equal(2);
  });

  it('E8 reconciliation: an empty reply keeps SYNCHRONIZED; an unseen tail batch is applied (silent_loss)', async () => {
    const r = await rigs.open({ engineKind: 'vllm', limits: { resyncIntervalMs: 1000, replayTimeoutMs: 300 } });
    await r.startSynchronized();
    await publishChain(r, 0, 2);
    await r.atSequence(1n);
    await waitFor(() => r.reconciles.includes('equal'), 5000, 'an equal reconciliation');
    expect(r.sub.state).to.equal('SYNCHRONIZED');
    expect(r.sub.counters.silentLoss).to.equal(0);
    // The last batch of a publisher that then goes quiet is lost in transit.
    r.pub.dropNextBatch();
    await r.pub.publish(chainBatch(2));
    await r.atSequence(2n, 5000);
    expect(r.reconciles).to.include('replaced');
    expect(r.sub.counters.silentLoss).to.equal(1);
    expect(r.hits(chainTokens(0, 3))).to.equal(3);
    expect(r.states.filter((s) => s !== 'SYNCHRONIZED').length, 'never left SYNCHRONIZED after the first sync').to.equal(r.states.indexOf('SYNCHRONIZED'));
  });

  for (const encoding of ['array', 'map'] as const) {
    it(`E9 missing dp_rank (${encoding} batch) accepted for vllm/sglang`, async () => {
      const r = await rigs.open({ engineKind: 'vllm', dpRank: 1, batchForm: { encoding, omitDpRank: true } });
      await r.startSynchronized();
      await publishChain(r, 0, 2);
      await r.atSequence(1n);
      expect(r.hits(chainTokens(0, 2))).to.equal(2);
    });
  }

  it('E9 missing dp_rank rejected for xllm, and the error stays visible while unsynchronized (rule 6)', async () => {
    const r = await rigs.open({ limits: { replayTimeoutMs: 200 } });
    await r.startSynchronized();
    const encoder = new WireEncoder();
    const noRank = (events: WireEvent[]): Uint8Array =>
      encoder.encodeBatchAs(Date.now() / 1000, events.map((e) => encoder.encodeEvent(e)), null, { encoding: 'array', omitDpRank: true });
    // Recoveries time out from now on, so the stream stays out of SYNCHRONIZED.
    r.pub.snapshotFaults.dropRequests = true;
    await r.pub.publishPayload(noRank(chainBatch(0)));
    await r.inState('UNSYNCHRONIZED');
    expect(r.errorClass()).to.equal('protocol');
    await waitFor(() => r.sub.error.startsWith('timeout:'), 5000, 'a timed-out recovery');
    const before = r.sub.counters.syncLost['protocol'] ?? 0;
    await waitFor(async () => {
      if (r.sub.state === 'UNSYNCHRONIZED') await r.pub.publishPayload(noRank([]), { consumeSeq: false });
      return r.sub.error.startsWith('protocol:') && (r.sub.counters.syncLost['protocol'] ?? 0) > before;
    }, 5000, 'the protocol error shown again while UNSYNCHRONIZED');
    expect(r.sub.error).to.match(/^protocol: batch dp_rank is nil or missing/);
  });

  it('E10 no replay endpoint: seq 0 synchronizes; a gap is history_lost; a full-state batch restores', async () => {
    const r = await rigs.open({ engineKind: 'vllm', replayLayout: 'none' });
    expect(r.sub.config.replayEndpoint).to.equal('');
    r.sub.start();
    await r.pub.waitForSubscribers(1);
    await r.inState('RECOVERING');
    await publishChain(r, 0, 2);
    await r.atSequence(1n);
    r.pub.dropNextBatch();
    await r.pub.publish(chainBatch(2));
    await r.pub.publish(chainBatch(3));
    await r.inState('UNSYNCHRONIZED');
    expect(r.errorClass()).to.equal('history_lost');
    expect(r.query(chainTokens(0, 2)).reusable_prefix_tokens).to.equal(0);
    const seq = await r.pub.publish([cleared(null)]);
    await r.atSequence(seq);
    expect(r.pub.snapshotRequests).to.deep.equal([]);
  });

  it('E10 no replay endpoint: joining after the engine published gives no credit until a full-state batch', async () => {
    const r = await rigs.open({ engineKind: 'sglang', replayLayout: 'none' });
    await publishChain(r, 0, 3);
    r.sub.start();
    await r.pub.waitForSubscribers(1);
    await r.pub.publish(chainBatch(3));
    await r.inState('UNSYNCHRONIZED');
    expect(r.sub.error).to.equal('history_lost: no replay endpoint; live starts at 3, needed 0; waiting for a full-state batch');
    const seq = await r.pub.publish([cleared(null), stored([100], null, blockTokens(0))]);
    await r.atSequence(seq);
    expect(r.hits(chainTokens(0, 2))).to.equal(1);
  });

  it('E13 a STORAGE medium never breaks sync: no tier, skipped{reason=medium}, children chain', async () => {
    const r = await rigs.open({ engineKind: 'vllm' });
    await r.startSynchronized();
    await r.apply([stored([100], null, blockTokens(0), 'STORAGE'), stored([101], 100, blockTokens(1), 'GPU')]);
    await r.apply([{ type: 'BlockRemoved', block_hashes: [100], medium: 'STORAGE' }, { type: 'AllBlocksCleared', medium: 'STORAGE' }]);
    expect(r.sub.state).to.equal('SYNCHRONIZED');
    expect(r.sub.counters.skipped.medium).to.equal(1);
    expect(r.hits(chainTokens(0, 2)), 'block 0 has no served tier').to.equal(0);
    expect(r.sub.index?.deviceBlocks).to.equal(1);
  });

  it('E14 first connect to a busy engine abandons the exchange at the first seq above start_seq', async () => {
    const r = await rigs.open({ engineKind: 'vllm', replayBufferSteps: 10_000 });
    // 12,000 batches of ~3 KiB: the ring has rotated past seq 0 and holds far more than the
    // ZeroMQ pipes and TCP buffers between the two sockets.
    const big: WireEvent[] = [stored(Array.from({ length: 96 }, (_, i) => 1000 + i), null, chainTokens(0, 96))];
    for (let i = 0; i < 12_000; i++) await r.pub.publish(big);
    r.sub.start();
    await r.inState('UNSYNCHRONIZED', 10_000);
    expect(r.sub.error).to.equal('history_lost: replay starts at 2000, needed 0; waiting for a full-state batch');
    const reply = await waitFor(() => (r.pub.historyReplies[0]?.done ? r.pub.historyReplies[0] : null), 10_000, 'the reply loop to end');
    expect(reply.total).to.equal(10_000);
    expect(reply.sent, 'history messages handed over before the DEALER closed').to.be.below(reply.total);
  });
});

describe('engines.md §3 rule 4 disconnect (E7) over real ZeroMQ', function () {
  this.timeout(30_000);
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** A vllm publisher whose event socket the stream reaches through a TCP proxy it can cut. */
  async function openBehindProxy(identity?: EngineIdentitySource): Promise<{ pub: RankPublisher; sub: StreamSubscriber; proxy: TcpProxy }> {
    const eventPort = await freePort();
    const pub = await RankPublisher.start({ eventPort, replayPort: await freePort(), dpRank: 0, blockSize: 4, engineKind: 'vllm' });
    closers.push(() => pub.close());
    const proxy = new TcpProxy(await freePort(), eventPort);
    await proxy.up();
    closers.push(() => proxy.down());
    const sub = await StreamSubscriber.create(
      {
        instanceName: 'vllm-0',
        dpRank: 0,
        blockSize: 4,
        endpoint: `tcp://127.0.0.1:${proxy.port}`,
        replayEndpoint: pub.replayEndpoint,
        topic: '',
        hashSeed: 1024n,
        engineKind: 'vllm',
        ...(identity !== undefined ? { identity } : {}),
      },
      BASE_LIMITS,
      { random: () => 0 },
    );
    closers.push(() => sub.close());
    return { pub, sub, proxy };
  }

  async function synchronizedAt(sub: StreamSubscriber, seq: bigint): Promise<void> {
    await waitFor(() => sub.state === 'SYNCHRONIZED' && sub.sequence === seq, 5000, `seq ${seq} (now ${sub.state} ${sub.sequence} ${sub.error})`);
  }

  /** Starts the stream, publishes batch 0 and returns the index that holds it. */
  async function startWithOneBatch(pub: RankPublisher, sub: StreamSubscriber): Promise<StreamSubscriber['index']> {
    sub.start();
    await waitFor(() => sub.state === 'SYNCHRONIZED', 5000, 'sync');
    await pub.waitForSubscribers(1);
    await pub.publish(chainBatch(0));
    await synchronizedAt(sub, 0n);
    return sub.index;
  }

  async function cutAndRestore(proxy: TcpProxy, sub: StreamSubscriber): Promise<void> {
    await proxy.down();
    await waitFor(() => sub.state === 'CONNECTING', 10_000, 'the disconnect');
    expect(sub.index).to.equal(null);
    expect(sub.toQueryable().index).to.equal(null);
    await proxy.up();
  }

  it('E7 disconnect without an identity source → index discarded, recovered from 0, no stale credit', async () => {
    const { pub, sub, proxy } = await openBehindProxy();
    const index = await startWithOneBatch(pub, sub);
    await cutAndRestore(proxy, sub);
    await synchronizedAt(sub, 0n);
    expect(sub.index).to.not.equal(index);
    expect(pub.snapshotRequests).to.deep.equal([0n, 0n]);
  });

  it('E7 disconnect + reconnect with the same identity → resumed from last + 1 (identity source is a test object: part B scrapes /metrics)', async () => {
    let identity = 'start-1700000000';
    let scrapes = 0;
    const source: EngineIdentitySource = {
      current: () => identity,
      scrapeNow: () => {
        scrapes++;
        return Promise.resolve(identity);
      },
    };
    const { pub, sub, proxy } = await openBehindProxy(source);
    const index = await startWithOneBatch(pub, sub);
    await cutAndRestore(proxy, sub);
    await pub.waitForSubscribers(1);
    await synchronizedAt(sub, 0n);
    expect(scrapes, 'a scrape taken after the reconnect').to.be.at.least(1);
    expect(sub.index, 'the same index, resumed').to.equal(index);
    expect(pub.snapshotRequests).to.deep.equal([0n, 1n]);

    // Changed identity (a new process behind the address) → discarded, first connect.
    identity = 'start-1700000999';
    await cutAndRestore(proxy, sub);
    await synchronizedAt(sub, 0n);
    expect(sub.index).to.not.equal(index);
    expect(pub.snapshotRequests).to.deep.equal([0n, 1n, 0n]);
  });

  it('E7 /metrics unreachable after the reconnect: the index stays hidden, then is discarded at replay_timeout_ms', async () => {
    let scrapes = 0;
    const source: EngineIdentitySource = {
      current: () => 'start-1',
      scrapeNow: () => {
        scrapes++;
        return Promise.reject(new Error('connect ECONNREFUSED'));
      },
    };
    const { pub, sub, proxy } = await openBehindProxy(source);
    const index = await startWithOneBatch(pub, sub);
    await cutAndRestore(proxy, sub);
    await synchronizedAt(sub, 0n);
    expect(scrapes, 'retried while unreachable').to.be.at.least(2);
    expect(sub.index).to.not.equal(index);
    expect(pub.snapshotRequests).to.deep.equal([0n, 0n]);
  });
});
