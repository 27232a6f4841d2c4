// Engine simulator end to end (kv-events §1, §2, §6, §11): simulated ranks publish over real
// ZeroMQ; the test decodes what arrives on a real SUB and DEALER and replays it through a
// reference model that is strict about the §11 obligations.
//
//   BlockPool ─events─▶ RankPublisher ──[topic, seq, batch]──▶ SUB   → ObligationChecker
//                                    ◀──["", start_seq]──────  DEALER
//                                    ──["", W, chunk]…["", ff×8, ""]─▶ → snapshot = checker state
import { expect } from 'chai';
import { decode } from '@msgpack/msgpack';
import * as zmq from 'zeromq';
import { freePortRange } from '../../helpers/ports.js';
import { EngineSimulator } from '../../../tools/engine-sim/engine-simulator.js';
import { readU64be, u64be } from '../../../tools/engine-sim/wire-encoding.js';
import type { WireEvent, WireSnapshotBlock } from '../../../tools/engine-sim/wire-types.js';
import { ObligationChecker, expectSnapshotMatches } from './obligation-checker.js';
import { Inbox } from './zmq-inbox.js';

const dec = (b: Uint8Array): unknown => decode(b, { useBigInt64: true });

interface Received {
  seq: bigint;
  payloadBytes: number;
  dpRank: unknown;
  events: WireEvent[];
}

interface SnapshotReply {
  watermark: bigint;
  chunkBytes: number[];
  blocks: WireSnapshotBlock[];
}

/** Deterministic prompts sharing prefixes (a fixed LCG, no Math.random). */
function prompts(count: number, blockSize: number, seed: number): number[][] {
  let x = seed;
  const next = (n: number): number => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return x % n;
  };
  const out: number[][] = [];
  for (let i = 0; i < count; i++) {
    const blocks = 1 + next(5);
    const p: number[] = [];
    for (let b = 0; b < blocks; b++) for (let t = 0; t < blockSize; t++) p.push(1000 * next(4) + b * blockSize + t);
    for (let t = next(blockSize); t > 0; t--) p.push(7);
    out.push(p);
  }
  return out;
}

describe('engine-sim simulator over ZeroMQ (kv-events §1, §2, §6, §11)', () => {
  let sim: EngineSimulator | undefined;
  const sockets: zmq.Socket[] = [];

  afterEach(async () => {
    for (const s of sockets.splice(0)) s.close();
    await sim?.close();
    sim = undefined;
  });

  async function startSim(opts: { dpSize?: number; deviceCapacityBlocks?: number; hostCapacityBlocks?: number; blockSize?: number; maxMessageBytes?: number; offloadMode?: 'sync' | 'async' } = {}): Promise<EngineSimulator> {
    const dpSize = opts.dpSize ?? 1;
    sim = await EngineSimulator.start({
      instanceName: 'sim-a',
      dpSize,
      blockSize: opts.blockSize ?? 4,
      eventPortBase: await freePortRange(dpSize),
      replayPortBase: await freePortRange(dpSize),
      topic: 'xllm-kv',
      deviceCapacityBlocks: opts.deviceCapacityBlocks ?? 64,
      hostCapacityBlocks: opts.hostCapacityBlocks ?? 0,
      maxMessageBytes: opts.maxMessageBytes,
      offloadMode: opts.offloadMode,
    });
    return sim;
  }

  async function subscribe(s: EngineSimulator, rank: number): Promise<{ next(): Promise<Received> }> {
    const sub = new zmq.Subscriber({ linger: 0 });
    sockets.push(sub);
    sub.connect(s.eventEndpoints[rank]);
    sub.subscribe('xllm-kv');
    const inbox = new Inbox(sub);
    await s.rank(rank).publisher.waitForSubscribers(1);
    return {
      async next(): Promise<Received> {
        const frames = await inbox.next();
        expect(frames).to.have.length(3);
        expect(frames[0].toString()).to.equal('xllm-kv');
        const batch = dec(frames[2]) as unknown[];
        expect(batch).to.be.an('array').with.length(3);
        return { seq: readU64be(frames[1]) as bigint, payloadBytes: frames[2].length, dpRank: batch[2], events: batch[1] as WireEvent[] };
      },
    };
  }

  async function snapshot(s: EngineSimulator, rank: number): Promise<SnapshotReply> {
    const d = new zmq.Dealer({ linger: 0 });
    sockets.push(d);
    d.connect(s.replayEndpoints[rank]);
    const inbox = new Inbox(d);
    await d.send([new Uint8Array(0), u64be(0n)]);
    const reply: SnapshotReply = { watermark: -1n, chunkBytes: [], blocks: [] };
    for (;;) {
      const m = await inbox.next();
      expect(m).to.have.length(3);
      expect(m[0].length).to.equal(0);
      const w = readU64be(m[1]) as bigint;
      if (w === 0xffffffffffffffffn) {
        expect(m[2].length).to.equal(0);
        return reply;
      }
      if (reply.chunkBytes.length > 0) expect(w).to.equal(reply.watermark);
      reply.watermark = w;
      reply.chunkBytes.push(m[2].length);
      const chunk = dec(m[2]) as { dp_rank: unknown; block_size: unknown; blocks: WireSnapshotBlock[] };
      expect(chunk.dp_rank).to.equal(rank);
      expect(chunk.block_size).to.equal(s.blockSize);
      reply.blocks.push(...chunk.blocks);
    }
  }

  it('§1 §11.1 rank r binds base + r; §11.7 batch 0 of each rank is [AllBlocksCleared]', async () => {
    const s = await startSim({ dpSize: 2 });
    const ports = s.eventEndpoints.map((e) => Number(e.split(':')[2]));
    expect(ports[1]).to.equal(ports[0] + 1);
    const replayPorts = s.replayEndpoints.map((e) => Number(e.split(':')[2]));
    expect(replayPorts[1]).to.equal(replayPorts[0] + 1);
    for (const r of [0, 1]) {
      expect(s.rank(r).publisher.nextSeq).to.equal(1n);
      const snap = await snapshot(s, r);
      expect(snap.watermark).to.equal(1n);
      expect(snap.blocks).to.deep.equal([]);
    }
  });

  it('§11.2 admitPrompt publishes the step as one batch with the next seq and the rank stamped', async () => {
    const s = await startSim({ dpSize: 2 });
    const sub1 = await subscribe(s, 1);
    const step = await s.rank(1).admitPrompt([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(step.seqs).to.deep.equal([1n]);
    const got = await sub1.next();
    expect(got.seq).to.equal(1n);
    expect(got.dpRank).to.equal(1);
    expect(got.events).to.have.length(1);
    const e = got.events[0] as Record<string, unknown>;
    expect(e.type).to.equal('BlockStored');
    expect(e.token_ids).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8]);
    expect((e.block_hashes as unknown[]).map((h) => BigInt(h as bigint))).to.deep.equal(s.rank(1).pool.hashesOf([1, 2, 3, 4, 5, 6, 7, 8]));
    // A fully resident prompt changes nothing and publishes nothing.
    const again = await s.rank(1).admitPrompt([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(again.seqs).to.deep.equal([]);
    expect(again.hitBlocks).to.equal(2);
    // Rank 0 is untouched (P2: ranks never share state).
    expect(s.rank(0).pool.deviceBlocks).to.equal(0);
  });

  for (const offloadMode of ['sync', 'async'] as const) {
    it(`§11 §6 (${offloadMode} offload) wire events obey §11 and the snapshot equals their replay`, async () => {
      const s = await startSim({ deviceCapacityBlocks: 6, hostCapacityBlocks: 5, offloadMode });
      const sub = await subscribe(s, 0);
      const checker = new ObligationChecker(4);
      let lastSeq = 0n;
      let hostHits = 0;
      for (const p of prompts(60, 4, 7)) {
        const step = await s.rank(0).admitPrompt(p);
        hostHits += step.hostHitBlocks;
        for (const seq of step.seqs) {
          const got = await sub.next();
          expect(got.seq).to.equal(seq);
          expect(seq).to.equal(lastSeq + 1n);
          lastSeq = seq;
          checker.apply(got.events);
        }
        expect(s.rank(0).pool.deviceBlocks).to.be.at.most(6);
        expect(s.rank(0).pool.hostBlocks).to.be.at.most(5);
      }
      expect(hostHits, 'the mix exercises Host reloads').to.be.greaterThan(0);
      const snap = await snapshot(s, 0);
      expect(snap.watermark).to.equal(lastSeq + 1n);
      expectSnapshotMatches(snap.blocks, checker);
    });
  }

  it('§11.3 a step over max_message_bytes goes out as several batches and chunks, each within it', async () => {
    const blockSize = 512;
    const s = await startSim({ blockSize, deviceCapacityBlocks: 100, maxMessageBytes: 65536 });
    const sub = await subscribe(s, 0);
    const tokens = Array.from({ length: 40 * blockSize }, (_, i) => 100000 + i);
    const step = await s.rank(0).admitPrompt(tokens);
    expect(step.seqs.length).to.be.greaterThan(1);
    const checker = new ObligationChecker(blockSize);
    for (const seq of step.seqs) {
      const got = await sub.next();
      expect(got.seq).to.equal(seq);
      expect(got.payloadBytes).to.be.at.most(65536);
      checker.apply(got.events);
    }
    expect(checker.blocks.size).to.equal(40);
    const snap = await snapshot(s, 0);
    expect(snap.chunkBytes.length).to.be.greaterThan(1);
    for (const n of snap.chunkBytes) expect(n).to.be.at.most(65536);
    expectSnapshotMatches(snap.blocks, checker);
  });

  it('R5 restart: seq back to 0, empty pool, batch 0 a clear; subscribers reconnect on the same port', async () => {
    const s = await startSim();
    const sub = await subscribe(s, 0);
    await s.rank(0).admitPrompt([1, 2, 3, 4]);
    expect((await sub.next()).seq).to.equal(1n);
    await s.restart();
    expect(s.rank(0).publisher.nextSeq).to.equal(1n);
    expect(s.rank(0).pool.deviceBlocks).to.equal(0);
    await s.rank(0).publisher.waitForSubscribers(1);
    const step = await s.rank(0).admitPrompt([1, 2, 3, 4]);
    expect(step.hitBlocks).to.equal(0);
    expect((await sub.next()).seq).to.equal(1n);
    const snap = await snapshot(s, 0);
    expect(snap.watermark).to.equal(2n);
    expect(snap.blocks).to.have.length(1);
  });

  it('R10 restart keeping the cache: batch 0 is a full-state batch and the snapshot is unchanged', async () => {
    const s = await startSim({ deviceCapacityBlocks: 3, hostCapacityBlocks: 3 });
    for (const p of prompts(10, 4, 3)) await s.rank(0).admitPrompt(p);
    const before = await snapshot(s, 0);
    await s.restart({ keepState: true });
    expect(s.rank(0).publisher.nextSeq).to.equal(1n);
    const after = await snapshot(s, 0);
    expect(after.watermark).to.equal(1n);
    expect(after.blocks).to.deep.equal(before.blocks);
    // What batch 0 restated, replayed on its own, is the state minus unrestatable orphans.
    const restated = s.rank(0).publisher.publishedState();
    expect(restated.length).to.be.greaterThan(0);
    expect(restated.length).to.be.at.most(after.blocks.length);
  });

  it('R4 a dropped batch leaves a seq gap on the wire while the snapshot still reflects it', async () => {
    const s = await startSim();
    const sub = await subscribe(s, 0);
    s.rank(0).publisher.dropNextBatch();
    await s.rank(0).admitPrompt([1, 2, 3, 4]);
    await s.rank(0).admitPrompt([9, 9, 9, 9]);
    expect((await sub.next()).seq).to.equal(2n);
    const snap = await snapshot(s, 0);
    expect(snap.watermark).to.equal(3n);
    expect(snap.blocks).to.have.length(2);
  });
});
