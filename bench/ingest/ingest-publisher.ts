/**
 * Publisher process of the ingest benchmark (forked by ingest.bench.ts, so its encoding and
 * sending never run on the measured event loop). Binds, per stream, an XPUB event endpoint and a
 * ROUTER snapshot endpoint on ephemeral 127.0.0.1 ports (kv-events §1), answers every snapshot
 * request with the empty state at the current watermark (§6), and on 'go' sends `messages`
 * batches per stream: seq 0, 1, … (§2) over one pre-encoded load cycle (ingest-load.ts).
 *
 * Nothing is dropped: the XPUB is ZMQ_XPUB_NODROP with a large ZMQ_SNDHWM, so a slow subscriber
 * makes `send` wait instead of losing a batch (the benchmark then checks the final sequence).
 *
 * IPC (parent ⇄ child): child → {type:'ready', streams:[{endpoint, replayEndpoint}]},
 * {type:'subscribed'} once every XPUB has a subscriber, {type:'sent'} after the last send;
 * parent → {type:'go'}, {type:'exit'}.
 *
 * Args: --streams=N --messages=M --seed=S --topic=T
 */
import * as zmq from 'zeromq';
import { EMPTY_FRAME, TERMINATOR_WATERMARK, WireEncoder, encodeSnapshotChunks, u64be } from '../../tools/engine-sim/wire-encoding.js';
import { INGEST_LOAD_SHAPE, buildIngestLoad } from './ingest-load.js';

function arg(name: string, fallback: string): string {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit === undefined ? fallback : hit.slice(name.length + 3);
}

const STREAMS = Number(arg('streams', '1'));
const MESSAGES = Number(arg('messages', '1000'));
const SEED = Number(arg('seed', '1'));
const TOPIC = Buffer.from(arg('topic', ''), 'utf8');
/** ZMQ_SNDHWM per stream, in messages: with NODROP this bounds memory, never loses a batch. */
const SEND_HWM = 100_000;

interface StreamEndpoint {
  pub: zmq.XPublisher;
  router: zmq.Router;
  /** Seq of the next batch: the §6 watermark a snapshot taken now reflects. */
  nextSeq: number;
  subscribed: boolean;
}

const load = buildIngestLoad({ ...INGEST_LOAD_SHAPE, seed: SEED, dpRank: 0 });
const seqFrames: Uint8Array[] = Array.from({ length: MESSAGES }, (_, i) => u64be(BigInt(i)));
const encoder = new WireEncoder();
const emptyChunk = encodeSnapshotChunks(encoder, [], 0, INGEST_LOAD_SHAPE.blockSize, 8 * 1024 * 1024, Number.POSITIVE_INFINITY)[0];

function send(msg: unknown): void {
  if (process.send !== undefined) process.send(msg);
}

async function watchSubscriptions(s: StreamEndpoint, all: StreamEndpoint[]): Promise<void> {
  try {
    for await (const [msg] of s.pub) {
      if (msg.length === 0 || msg[0] !== 1 || s.subscribed) continue;
      s.subscribed = true;
      if (all.every((x) => x.subscribed)) send({ type: 'subscribed' });
    }
  } catch {
    // closed at exit
  }
}

async function serveSnapshots(s: StreamEndpoint): Promise<void> {
  try {
    for await (const [identity] of s.router) {
      await s.router.send([identity, EMPTY_FRAME, u64be(BigInt(s.nextSeq)), emptyChunk]);
      await s.router.send([identity, EMPTY_FRAME, TERMINATOR_WATERMARK, EMPTY_FRAME]);
    }
  } catch {
    // closed at exit
  }
}

async function sendAll(s: StreamEndpoint): Promise<void> {
  const payloads = load.payloads;
  const cycle = payloads.length;
  for (let i = 0; i < MESSAGES; i++) {
    s.nextSeq = i + 1;
    await s.pub.send([TOPIC, seqFrames[i], payloads[i % cycle]]);
  }
}

async function main(): Promise<void> {
  const streams: StreamEndpoint[] = [];
  for (let i = 0; i < STREAMS; i++) {
    const pub = new zmq.XPublisher({ linger: 0, noDrop: true, sendHighWaterMark: SEND_HWM });
    const router = new zmq.Router({ linger: 0 });
    await pub.bind('tcp://127.0.0.1:*');
    await router.bind('tcp://127.0.0.1:*');
    streams.push({ pub, router, nextSeq: 0, subscribed: false });
  }
  for (const s of streams) {
    void watchSubscriptions(s, streams);
    void serveSnapshots(s);
  }
  process.on('message', (m: { type?: string }) => {
    if (m.type === 'go') {
      void Promise.all(streams.map((s) => sendAll(s))).then(() => send({ type: 'sent' }));
    } else if (m.type === 'exit') {
      for (const s of streams) {
        s.pub.close();
        s.router.close();
      }
      process.exit(0);
    }
  });
  process.on('disconnect', () => process.exit(0));
  send({
    type: 'ready',
    streams: streams.map((s) => ({ endpoint: s.pub.lastEndpoint as string, replayEndpoint: s.router.lastEndpoint as string })),
  });
}

void main();
