// Engine simulator, publisher side (kv-events §2, §3, §6, §11): a real zmq SUB and DEALER in
// the test, the simulator's XPUB/ROUTER on free TCP ports.
//
//   SUB  ◀──[topic, seq, payload]── RankPublisher ──["", W, chunk]…["", ff×8, ""]──▶ DEALER
import { expect } from 'chai';
import { decode } from '@msgpack/msgpack';
import * as zmq from 'zeromq';
import { freePort, waitFor } from '../../helpers/ports.js';
import { RankPublisher } from '../../../tools/engine-sim/rank-publisher.js';
import { SimClosedError, SimLimitError } from '../../../tools/engine-sim/sim-errors.js';
import { readU64be, u64be } from '../../../tools/engine-sim/wire-encoding.js';
import type { WireEvent } from '../../../tools/engine-sim/wire-types.js';
import { Inbox } from './zmq-inbox.js';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const dec = (b: Uint8Array): unknown => decode(b, { useBigInt64: true });
const TERMINATOR = 'ffffffffffffffff';

const stored = (hashes: number[], parent: number | null, tokens: number[], medium = 'gpu'): WireEvent => ({
  type: 'BlockStored',
  block_hashes: hashes,
  parent_block_hash: parent,
  token_ids: tokens,
  block_size: 4,
  medium,
});

describe('engine-sim rank publisher (kv-events §2, §3, §6, §11)', () => {
  let pub: RankPublisher | undefined;
  const sockets: zmq.Socket[] = [];

  afterEach(async () => {
    for (const s of sockets.splice(0)) s.close();
    await pub?.close();
    pub = undefined;
  });

  async function startPublisher(topic = 'xllm-kv', maxMessageBytes?: number): Promise<RankPublisher> {
    pub = await RankPublisher.start({ eventPort: await freePort(), replayPort: await freePort(), dpRank: 0, topic, blockSize: 4, maxMessageBytes });
    return pub;
  }

  async function subscribe(p: RankPublisher, filter = p.topic): Promise<Inbox> {
    const sub = new zmq.Subscriber({ linger: 0 });
    sockets.push(sub);
    sub.connect(p.eventEndpoint);
    sub.subscribe(filter);
    const inbox = new Inbox(sub);
    await p.waitForSubscribers(1);
    return inbox;
  }

  interface DealerEnd {
    send(frames: Uint8Array[]): Promise<void>;
    receive(): Promise<Buffer[]>;
  }

  function dealer(p: RankPublisher): DealerEnd {
    const d = new zmq.Dealer({ linger: 0 });
    sockets.push(d);
    d.connect(p.replayEndpoint);
    const inbox = new Inbox(d);
    return { send: (frames) => d.send(frames), receive: () => inbox.next() };
  }

  /** One snapshot exchange: request, then every message up to and including the terminator. */
  async function requestSnapshot(d: DealerEnd, startSeq: bigint): Promise<Buffer[][]> {
    await d.send([new Uint8Array(0), u64be(startSeq)]);
    const messages: Buffer[][] = [];
    for (;;) {
      const m = await d.receive();
      messages.push(m);
      if (hex(m[1]) === TERMINATOR) return messages;
    }
  }

  it('§2 live messages have 3 frames: exact topic, u64be seq from 0 +1 per batch, one payload', async () => {
    const p = await startPublisher();
    const sub = await subscribe(p);
    expect(await p.publish([{ type: 'AllBlocksCleared' }])).to.equal(0n);
    expect(await p.publish([])).to.equal(1n);
    expect(await p.publish([stored([11], null, [1, 2, 3, 4])])).to.equal(2n);
    for (const expected of ['0000000000000000', '0000000000000001', '0000000000000002']) {
      const frames = await sub.next();
      expect(frames).to.have.length(3);
      expect(frames[0].toString('utf8')).to.equal('xllm-kv');
      expect(hex(frames[1])).to.equal(expected);
    }
    expect(p.nextSeq).to.equal(3n);
  });

  it('§3.1 payload is an array batch [float64 ts, map events with "type", dp_rank]', async () => {
    const p = await startPublisher('');
    const sub = await subscribe(p);
    await p.publish([stored([11, 12], null, [1, 2, 3, 4, 5, 6, 7, 8]), { type: 'BlockRemoved', block_hashes: [12], medium: 'gpu' }], { ts: 1700000001 });
    const [, , payload] = await sub.next();
    // ts is float64 (cb) even for a whole second.
    expect(hex(payload.subarray(0, 2))).to.equal('93cb');
    const batch = dec(payload) as unknown[];
    expect(batch[0]).to.equal(1700000001);
    expect(batch[2]).to.equal(0);
    const events = batch[1] as Record<string, unknown>[];
    expect(events.map((e) => e.type)).to.deep.equal(['BlockStored', 'BlockRemoved']);
    expect(events[0].parent_block_hash).to.equal(null);
    expect(events[0].token_ids).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('§3.5 map event in an array batch is byte-identical to the spec example (107 bytes)', async () => {
    const p = await startPublisher('');
    const sub = await subscribe(p);
    await p.publish([stored([11, 12], null, [1, 2, 3, 4, 5, 6, 7, 8])], { ts: 1700000000.5 });
    const [, , payload] = await sub.next();
    const event =
      '86a474797065ab426c6f636b53746f726564ac626c6f636b5f686173686573920b0cb1706172656e745f626c6f636b5f68617368c0' +
      'a9746f6b656e5f69647398010203040506070' + '8aa626c6f636b5f73697a6504a66d656469756da3677075';
    expect(event.length / 2).to.equal(95);
    expect(hex(payload)).to.equal('93cb41d954fc40200000' + '91' + event + '00');
  });

  it('§3.3 hashes stay exact: above 2^53 as uint64, small ones compact, bin passed through', async () => {
    const p = await startPublisher('');
    const sub = await subscribe(p);
    await p.publish([
      { type: 'BlockRemoved', block_hashes: [0xfffffffffffffffen, 11n, 2 ** 40, new Uint8Array([0x12, 0x34])], medium: 'cpu' },
    ]);
    const [, , payload] = await sub.next();
    expect(hex(payload)).to.contain('94cffffffffffffffffe0bcf0000010000000000c4021234');
    const events = (dec(payload) as unknown[])[1] as Record<string, unknown>[];
    expect((events[0].block_hashes as unknown[])[0]).to.equal(0xfffffffffffffffen);
  });

  it('D1 D2 legacy positional events pass through (hashes still exact) for decoder tests', async () => {
    const p = await startPublisher('');
    const sub = await subscribe(p);
    await p.publish([['BlockStored', [11, 2n ** 63n], null, [1, 2, 3, 4, 5, 6, 7, 8], 4], ['AllBlocksCleared']]);
    const events = (dec((await sub.next())[2]) as unknown[])[1] as unknown[][];
    expect(events[0]).to.deep.equal(['BlockStored', [11, 2n ** 63n], null, [1, 2, 3, 4, 5, 6, 7, 8], 4]);
    expect(events[1]).to.deep.equal(['AllBlocksCleared']);
  });

  it('a closed publisher refuses to publish with a typed closed error', async () => {
    const p = await startPublisher();
    await p.close();
    let err: unknown;
    try {
      await p.publish([]);
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(SimClosedError);
    expect((err as SimClosedError).class).to.equal('closed');
  });

  it('§3.1 dp_rank override: another rank or nil (fault injection for P3/D8)', async () => {
    const p = await startPublisher('');
    const sub = await subscribe(p);
    await p.publish([], { dpRank: 1 });
    await p.publish([], { dpRank: null });
    expect((dec((await sub.next())[2]) as unknown[])[2]).to.equal(1);
    expect((dec((await sub.next())[2]) as unknown[])[2]).to.equal(null);
  });

  it('§11.3 a batch over max_message_bytes is refused with a limit error and consumes no seq', async () => {
    const p = await startPublisher('', 1024);
    const tokens = Array.from({ length: 400 }, (_, i) => 100000 + i);
    const hashes = Array.from({ length: 100 }, (_, i) => i + 1);
    let err: unknown;
    try {
      await p.publish([{ type: 'BlockStored', block_hashes: hashes, parent_block_hash: null, token_ids: tokens, block_size: 4 }]);
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(SimLimitError);
    expect((err as SimLimitError).class).to.equal('limit');
    expect(p.nextSeq).to.equal(0n);
  });

  it('§7.1 dropNextBatch leaves a seq gap on the wire (0, 2)', async () => {
    const p = await startPublisher();
    const sub = await subscribe(p);
    await p.publish([]);
    p.dropNextBatch();
    expect(await p.publish([])).to.equal(1n);
    await p.publish([]);
    expect(readU64be((await sub.next())[1])).to.equal(0n);
    expect(readU64be((await sub.next())[1])).to.equal(2n);
  });

  it('D5 raw frames and raw payloads go out as given; publishPayload consumes a seq', async () => {
    const p = await startPublisher('t');
    const sub = await subscribe(p);
    await p.publishRaw([Buffer.from('t'), new Uint8Array(7)]);
    expect(await p.publishPayload(new Uint8Array([0xc1]))).to.equal(0n);
    expect(await p.publishPayload(new Uint8Array([0x90]), { consumeSeq: false })).to.equal(1n);
    const raw = await sub.next();
    expect(raw.map((f) => f.length)).to.deep.equal([1, 7]);
    expect(hex((await sub.next())[2])).to.equal('c1');
    expect(hex((await sub.next())[1])).to.equal('0000000000000001');
    expect(p.nextSeq).to.equal(1n);
  });

  it('R5 restart rebinds the same ports with seq back to 0 and an empty state', async () => {
    const p = await startPublisher();
    const sub = await subscribe(p);
    await p.publish([stored([11], null, [1, 2, 3, 4])]);
    await p.publish([]);
    expect(readU64be((await sub.next())[1])).to.equal(0n);
    expect(readU64be((await sub.next())[1])).to.equal(1n);
    await p.restart();
    expect(p.nextSeq).to.equal(0n);
    await p.waitForSubscribers(1);
    await p.publish([]);
    expect(readU64be((await sub.next())[1])).to.equal(0n);
    const reply = await requestSnapshot(dealer(p), 0n);
    expect(readU64be(reply[0][1])).to.equal(1n);
    expect((dec(reply[0][2]) as { blocks: unknown[] }).blocks).to.deep.equal([]);
  });

  it('§6 worked example: snapshot after seqs 0..6 gives W 7, one chunk, then the terminator', async () => {
    const p = await startPublisher();
    await p.publish([{ type: 'AllBlocksCleared' }]);
    await p.publish([stored([11, 12], null, [1, 2, 3, 4, 5, 6, 7, 8])]);
    await p.publish([{ type: 'BlockStored', block_hashes: [11, 12], parent_block_hash: null, token_ids: [], block_size: 4, medium: 'cpu' }]);
    await p.publish([{ type: 'BlockRemoved', block_hashes: [12], medium: 'gpu' }]);
    await p.publish([]);
    await p.publish([]);
    await p.publish([]);
    const reply = await requestSnapshot(dealer(p), 5n);
    expect(p.snapshotRequests).to.deep.equal([5n]);
    expect(reply).to.have.length(2);
    for (const m of reply) {
      expect(m).to.have.length(3);
      expect(m[0].length).to.equal(0);
    }
    expect(hex(reply[0][1])).to.equal('0000000000000007');
    expect(hex(reply[1][1])).to.equal(TERMINATOR);
    expect(reply[1][2].length).to.equal(0);
    expect(dec(reply[0][2])).to.deep.equal({
      dp_rank: 0,
      block_size: 4,
      blocks: [
        { block_hash: 11, parent_block_hash: null, token_ids: [1, 2, 3, 4], media: ['gpu', 'cpu'] },
        { block_hash: 12, parent_block_hash: 11, token_ids: [5, 6, 7, 8], media: ['cpu'] },
      ],
    });
    expect(reply[0][2].length).to.equal(150);
  });

  it('§6 empty state before any batch: W 0 and one chunk with no blocks', async () => {
    const p = await startPublisher();
    const reply = await requestSnapshot(dealer(p), 0n);
    expect(reply).to.have.length(2);
    expect(readU64be(reply[0][1])).to.equal(0n);
    expect(dec(reply[0][2])).to.deep.equal({ dp_rank: 0, block_size: 4, blocks: [] });
  });

  it('§6 chunks split by chunkBlocks and by max_message_bytes, same W, parent-first across chunks', async () => {
    const p = await startPublisher('', 2048);
    const hashes = Array.from({ length: 40 }, (_, i) => 1000 + i);
    const tokens = Array.from({ length: 160 }, (_, i) => 70000 + i);
    for (let i = 0; i < 40; i += 10) {
      await p.publish([{ type: 'BlockStored', block_hashes: hashes.slice(i, i + 10), parent_block_hash: i === 0 ? null : hashes[i - 1], token_ids: tokens.slice(i * 4, i * 4 + 40), block_size: 4 }]);
    }
    const bySize = await requestSnapshot(dealer(p), 0n);
    expect(bySize.length).to.be.greaterThan(2);
    const seen: unknown[] = [];
    for (const m of bySize.slice(0, -1)) {
      expect(m[2].length).to.be.at.most(2048);
      expect(readU64be(m[1])).to.equal(4n);
      seen.push(...(dec(m[2]) as { blocks: { block_hash: unknown }[] }).blocks.map((b) => b.block_hash));
    }
    expect(seen).to.deep.equal(hashes);

    p.snapshotFaults.chunkBlocks = 7;
    const byCount = await requestSnapshot(dealer(p), 0n);
    expect(byCount).to.have.length(Math.ceil(40 / 7) + 1);
    expect((dec(byCount[0][2]) as { blocks: unknown[] }).blocks).to.have.length(7);
  });

  it('R7 omitTerminator: chunks without the terminator (next reply on the same DEALER shows it)', async () => {
    const p = await startPublisher();
    const d = dealer(p);
    p.snapshotFaults.omitTerminator = true;
    await d.send([new Uint8Array(0), u64be(0n)]);
    const chunk = await d.receive();
    expect(readU64be(chunk[1])).to.equal(0n);
    p.snapshotFaults.omitTerminator = false;
    await p.publish([]);
    const next = await requestSnapshot(d, 0n);
    // The first message after the cut-off reply is the new reply's chunk (W 1), not a terminator.
    expect(readU64be(next[0][1])).to.equal(1n);
    expect(next).to.have.length(2);
  });

  it('§11.8 state captured at request time: a delayed reply still shows W of the request', async () => {
    const p = await startPublisher();
    const slow = dealer(p);
    p.snapshotFaults.delayMs = 300;
    await slow.send([new Uint8Array(0), u64be(0n)]);
    await waitFor(() => p.snapshotRequests.length === 1, 5000, 'request');
    await p.publish([stored([11], null, [1, 2, 3, 4])]);
    const chunk = await slow.receive();
    expect(readU64be(chunk[1])).to.equal(0n);
    expect((dec(chunk[2]) as { blocks: unknown[] }).blocks).to.deep.equal([]);
  });

  it('§11.8 concurrent requesters are served independently (a delayed one does not hold another)', async () => {
    const p = await startPublisher();
    await p.publish([stored([11], null, [1, 2, 3, 4])]);
    p.snapshotFaults.delayMs = 60_000;
    await dealer(p).send([new Uint8Array(0), u64be(0n)]);
    await waitFor(() => p.snapshotRequests.length === 1, 5000, 'first request');
    p.snapshotFaults.delayMs = 0;
    const reply = await requestSnapshot(dealer(p), 1n);
    expect(readU64be(reply[0][1])).to.equal(1n);
    expect(p.snapshotRequests).to.deep.equal([0n, 1n]);
  });

  it('R7 dropRequests: the request is recorded and never answered', async () => {
    const p = await startPublisher();
    const d = dealer(p);
    p.snapshotFaults.dropRequests = true;
    await d.send([new Uint8Array(0), u64be(3n)]);
    await waitFor(() => p.snapshotRequests.length === 1, 5000, 'request');
    p.snapshotFaults.dropRequests = false;
    await p.publish([]);
    const reply = await requestSnapshot(d, 4n);
    expect(readU64be(reply[0][1])).to.equal(1n);
    expect(p.snapshotRequests).to.deep.equal([3n, 4n]);
  });

  it('R9 overrideChunks sends custom reply messages verbatim; setSnapshotState fixes blocks and W', async () => {
    const p = await startPublisher();
    p.snapshotFaults.overrideChunks = ({ startSeq }) => [
      [new Uint8Array(0), u64be(startSeq + 1n), new Uint8Array([0x80])],
      [new Uint8Array(0), u64be(0xffffffffffffffffn), new Uint8Array(0)],
    ];
    const custom = await requestSnapshot(dealer(p), 9n);
    expect(custom.map((m) => hex(m[1]))).to.deep.equal(['000000000000000a', TERMINATOR]);
    expect(hex(custom[0][2])).to.equal('80');

    p.snapshotFaults.overrideChunks = undefined;
    p.setSnapshotState([{ block_hash: 0xfffffffffffffffen, parent_block_hash: null, token_ids: [1, 2, 3, 4], media: ['cpu'] }], 42n);
    const fixed = await requestSnapshot(dealer(p), 0n);
    expect(readU64be(fixed[0][1])).to.equal(42n);
    const chunk = dec(fixed[0][2]) as { blocks: { block_hash: unknown; media: unknown }[] };
    expect(chunk.blocks[0].block_hash).to.equal(0xfffffffffffffffen);
    expect(chunk.blocks[0].media).to.deep.equal(['cpu']);
  });
});
