/**
 * Publisher process of the scale benchmark (forked by scale.bench.ts, several at once, so
 * encoding and sending never run on the measured event loop). Owns `--ranks` publisher ranks,
 * each an XPUB event endpoint and a ROUTER snapshot endpoint on free 127.0.0.1 ports (§1). A
 * rank's state is two numbers, batches published and next seq; every block is regenerated from
 * the seed when a batch or a snapshot chunk is encoded (scale-load.ts), so 262,144 blocks per
 * rank cost no memory here.
 *
 * Flow control, so neither side's memory measures queues rather than the index:
 *  - live batches: the parent grants credit (batches the directory has applied); at most
 *    `--window` batches of this process are in flight. XPUB is NODROP besides.
 *  - snapshot replies (§6) are served one at a time per process, in request order: the next is
 *    started when the parent reports the previous stream SYNCHRONIZED or failed ('release'), or
 *    when the requester has gone (ROUTER_MANDATORY send fails: its DEALER timed out and closed).
 *    A reply's state and watermark are captured when the request arrives (§11.8).
 *
 * IPC (parent ⇄ child): child → {type:'ready', ranks:[{endpoint, replayEndpoint}]},
 * {type:'subscribed'}; parent → {type:'waitSubscribed'}, {type:'fill', upTo} (batches per
 * rank), {type:'credit', n}, {type:'forget'} (seq 0 and empty state, as a fresh process),
 * {type:'seqReset', ranks} (§7.1 publisher restart with the cache kept: seq back to 0, one empty
 * batch sent), {type:'release', rank}, {type:'exit'}.
 *
 * Args: --first-rank=R --ranks=N --blocks=B --seed=S --topic=T --window=W
 */
import * as zmq from 'zeromq';
import { EMPTY_FRAME, TERMINATOR_WATERMARK, WireEncoder, u64be } from '../../tools/engine-sim/wire-encoding.js';
import { SCALE_MAX_MESSAGE_BYTES, ScaleEncoder, scaleShape } from './scale-load.js';

function arg(name: string, fallback: string): string {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit === undefined ? fallback : hit.slice(name.length + 3);
}

const FIRST_RANK = Number(arg('first-rank', '0'));
const RANKS = Number(arg('ranks', '1'));
const SHAPE = scaleShape(Number(arg('blocks', '16384')));
const SEED = Number(arg('seed', '1'));
const TOPIC = Buffer.from(arg('topic', ''), 'utf8');
const WINDOW = Number(arg('window', '64'));

interface Rank {
  /** Global rank number (the load's document mapping and the stream name use it). */
  rank: number;
  dpRank: number;
  pub: zmq.XPublisher;
  router: zmq.Router;
  /** Batches published since the last 'forget': the state is exactly these. */
  batches: number;
  /** Seq of the next live batch (§11.2) = the §6 watermark of a snapshot taken now. */
  nextSeq: number;
  subscriptions: number;
  pumping: boolean;
  /** zeromq allows one send in flight per socket: live sends are chained. */
  sends: Promise<unknown>;
}

interface SnapshotJob {
  r: Rank;
  identity: Buffer;
  batches: number;
  watermark: number;
}

const encoder = new ScaleEncoder(SHAPE, SEED, SCALE_MAX_MESSAGE_BYTES);
const wire = new WireEncoder();
const ranks: Rank[] = [];
let fillTarget = 0;
let credit = WINDOW;
let creditWaiters: (() => void)[] = [];
let wantSubscribed = false;
const jobs: SnapshotJob[] = [];
const serving = new Set<Rank>();
/** Replies served at once by this process (see header). */
const MAX_SERVING = 1;

function send(msg: unknown): void {
  if (process.send !== undefined) process.send(msg);
}

function acquireCredit(): Promise<void> {
  if (credit > 0) {
    credit--;
    return Promise.resolve();
  }
  return new Promise<void>((resolve) => creditWaiters.push(resolve));
}

function addCredit(n: number): void {
  credit += n;
  while (credit > 0 && creditWaiters.length > 0) {
    credit--;
    creditWaiters.shift()!();
  }
}

function checkSubscribed(): void {
  if (wantSubscribed && ranks.every((r) => r.subscriptions > 0)) {
    wantSubscribed = false;
    send({ type: 'subscribed' });
  }
}

async function watchSubscriptions(r: Rank): Promise<void> {
  try {
    for await (const [msg] of r.pub) {
      if (msg.length === 0) continue;
      r.subscriptions += msg[0] === 1 ? 1 : msg[0] === 0 ? -1 : 0;
      checkSubscribed();
    }
  } catch {
    // closed at exit
  }
}

function sendLive(r: Rank, seq: number, payload: Uint8Array): Promise<unknown> {
  const next = r.sends.then(() => r.pub.send([TOPIC, u64be(BigInt(seq)), payload]));
  r.sends = next.catch(() => {});
  return next;
}

async function pump(r: Rank): Promise<void> {
  if (r.pumping) return;
  r.pumping = true;
  while (r.batches < fillTarget) {
    await acquireCredit();
    if (r.batches >= fillTarget) {
      addCredit(1);
      break;
    }
    // State and seq move together, synchronously, before any await (§11.8).
    const batch = r.batches++;
    const seq = r.nextSeq++;
    await sendLive(r, seq, encoder.liveBatch(r.rank, r.dpRank, batch, 1_700_000_000 + batch / 1000));
  }
  r.pumping = false;
}

async function serveSnapshots(r: Rank): Promise<void> {
  try {
    for await (const [identity] of r.router) {
      jobs.push({ r, identity, batches: r.batches, watermark: r.nextSeq });
      startJobs();
    }
  } catch {
    // closed at exit
  }
}

function startJobs(): void {
  while (serving.size < MAX_SERVING && jobs.length > 0) {
    const job = jobs.shift()!;
    serving.add(job.r);
    void reply(job);
  }
}

function release(r: Rank): void {
  if (serving.delete(r)) startJobs();
}

async function reply(job: SnapshotJob): Promise<void> {
  const { r, identity } = job;
  const w = u64be(BigInt(job.watermark));
  const chunks = encoder.chunkCount(job.batches * SHAPE.blocksPerBatch);
  try {
    for (let c = 0; c < chunks; c++) {
      await r.router.send([identity, EMPTY_FRAME, w, encoder.snapshotChunk(r.rank, r.dpRank, job.batches, c)]);
    }
    await r.router.send([identity, EMPTY_FRAME, TERMINATOR_WATERMARK, EMPTY_FRAME]);
  } catch {
    // EHOSTUNREACH: the requester timed out and closed its DEALER; nobody waits for the rest.
    release(r);
  }
}

async function main(): Promise<void> {
  for (let i = 0; i < RANKS; i++) {
    const pub = new zmq.XPublisher({ linger: 0, noDrop: true, sendHighWaterMark: 100_000 });
    pub.verbosity = 'allSubsUnsubs';
    // A low HWM with ROUTER_MANDATORY makes a send wait for the pipe, and fail once the peer left.
    const router = new zmq.Router({ linger: 0, mandatory: true, sendHighWaterMark: 4 });
    await pub.bind('tcp://127.0.0.1:*');
    await router.bind('tcp://127.0.0.1:*');
    const rank = FIRST_RANK + i;
    ranks.push({ rank, dpRank: rank % 4, pub, router, batches: 0, nextSeq: 0, subscriptions: 0, pumping: false, sends: Promise.resolve() });
  }
  for (const r of ranks) {
    void watchSubscriptions(r);
    void serveSnapshots(r);
  }
  process.on('message', (m: { type?: string; upTo?: number; n?: number; ranks?: number[]; rank?: number }) => {
    switch (m.type) {
      case 'waitSubscribed':
        wantSubscribed = true;
        checkSubscribed();
        break;
      case 'fill':
        fillTarget = m.upTo!;
        for (const r of ranks) void pump(r);
        break;
      case 'credit':
        addCredit(m.n!);
        break;
      case 'forget':
        fillTarget = 0;
        credit = WINDOW;
        creditWaiters = [];
        for (const r of ranks) {
          r.batches = 0;
          r.nextSeq = 0;
        }
        break;
      case 'seqReset':
        for (const global of m.ranks!) {
          const r = ranks[global - FIRST_RANK];
          r.nextSeq = 1;
          // An empty batch still consumes a seq (§3.1): seq 0 ≤ last is the §7.1 restart signal.
          void sendLive(r, 0, wire.encodeBatch(1_700_000_000, [], r.dpRank));
        }
        break;
      case 'release':
        release(ranks[m.rank! - FIRST_RANK]);
        break;
      case 'exit':
        for (const r of ranks) {
          r.pub.close();
          r.router.close();
        }
        process.exit(0);
    }
  });
  process.on('disconnect', () => process.exit(0));
  send({
    type: 'ready',
    ranks: ranks.map((r) => ({ endpoint: r.pub.lastEndpoint as string, replayEndpoint: r.router.lastEndpoint as string })),
  });
}

void main();
