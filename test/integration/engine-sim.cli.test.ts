/**
 * The simulated engine as a process (tools/engine-sim/cli.ts), against a real etcd and real
 * ZeroMQ: flag errors, etcd registration (discovery.md "etcd keys"), the OpenAI endpoint on the
 * instance's port, a clean SIGTERM (lease revoked), and the drop_every_n_batches fault as a
 * subscriber sees it (kv-events §2: a seq that never arrives), the vLLM mode (engines.md §5):
 * history replay in layout 3 and `POST /reset_prefix_cache` publishing `[AllBlocksCleared]`, and
 * cache identity (cache-identity §6): served models and the identity fields of published events.
 */
import { expect } from 'chai';
import { decode } from '@msgpack/msgpack';
import { Etcd3 } from 'etcd3';
import * as zmq from 'zeromq';
import { EtcdServer } from '../helpers/etcd-server.js';
import { waitFor } from '../helpers/ports.js';
import { ServiceProcess, stopAllProcesses } from '../../shared/process/service-process.js';
import { Inbox } from '../unit/engine-sim/zmq-inbox.js';
import { findFreeEngineBase } from '../../tools/stack/port-plan.js';
import { readU64be } from '../../tools/engine-sim/wire-encoding.js';

const CLI = 'tools/engine-sim/cli.ts';
const READY = 'engine simulator ready';

/**
 * PUB drops messages until the SUB has joined: `send` a request that publishes a new batch until
 * one arrives, and return that first message.
 */
function firstMessage(inbox: Inbox, send: () => Promise<void>): Promise<Buffer[]> {
  return waitFor(
    async () => {
      await send();
      return inbox.next(300).then(
        (m) => m,
        () => null,
      );
    },
    30000,
    'a first batch at the subscriber',
  );
}

describe('engine simulator CLI (tools/engine-sim/cli.ts) as a process', function () {
  this.timeout(90000);
  let etcd: EtcdServer | null = null;
  let client: Etcd3 | null = null;
  let sub: zmq.Subscriber | null = null;

  afterEach(async () => {
    sub?.close();
    sub = null;
    client?.close();
    client = null;
    await stopAllProcesses();
    await etcd?.destroy();
    etcd = null;
  });

  it('a bad flag exits 2 with one stderr line naming it', async () => {
    const proc = ServiceProcess.spawn({ name: 'engine', entry: CLI, args: ['--dp_size=0'] });
    const exit = await proc.waitForExit();
    expect(exit.code).to.equal(2);
    expect(proc.output).to.deep.equal(['invalid --dp_size: expected an integer in 1..64, got "0"']);
  });

  it('registers XLLM:PREFILL:<name> under the namespace with its incarnation and dp_size, serves completions on its port, and SIGTERM revokes the key and exits 0', async () => {
    etcd = await EtcdServer.start();
    const port = await findFreeEngineBase([{ type: 'PREFILL', dpSize: 2 }], new Set());
    const name = `127.0.0.1:${port}`;
    const proc = ServiceProcess.spawn({
      name: 'engine',
      entry: CLI,
      args: [`--name=${name}`, '--type=PREFILL', '--dp_size=2', '--block_size=4', `--etcd_addr=${etcd.address}`, '--etcd_namespace=ns', '--directory_http='],
    });
    const ready = await proc.waitForLog((l) => l['msg'] === READY);
    expect(ready['event_endpoints']).to.deep.equal([`tcp://127.0.0.1:${port + 10000}`, `tcp://127.0.0.1:${port + 10001}`]);
    expect(ready['replay_endpoints']).to.deep.equal([`tcp://127.0.0.1:${port + 30000}`, `tcp://127.0.0.1:${port + 30001}`]);

    client = new Etcd3({ hosts: etcd.clientUrl });
    const key = `/ns/XLLM:PREFILL:${name}`;
    const value = JSON.parse((await client.get(key).string())!) as Record<string, unknown>;
    expect(value).to.include({ name, type: 1, dp_size: 2, incarnation_id: ready['incarnation_id'], backend_type: 'xllm' });

    const res = await fetch(`http://${name}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [1, 2, 3, 4, 5], max_tokens: 2 }) });
    expect(res.status).to.equal(200);
    const body = (await res.json()) as { usage: { prompt_tokens: number } };
    expect(body.usage.prompt_tokens).to.equal(5);

    const exit = await proc.stop();
    expect(exit.code).to.equal(0);
    expect(await client.get(key).string()).to.equal(null);
  });

  it('cache-identity §1 --served_models on an xLLM engine: the etcd registration carries models (base first), rewritten when an adapter is loaded or unloaded at run time; without the flag the field is absent', async () => {
    etcd = await EtcdServer.start();
    const port = await findFreeEngineBase([{ type: 'DEFAULT', dpSize: 1 }], new Set());
    const name = `127.0.0.1:${port}`;
    ServiceProcess.spawn({ name: 'engine', entry: CLI, args: [`--name=${name}`, '--block_size=4', `--etcd_addr=${etcd.address}`, '--directory_http=', '--served_models=qwen3,sql-lora'] });
    client = new Etcd3({ hosts: etcd.clientUrl });
    const key = `XLLM:DEFAULT:${name}`;
    const models = async (): Promise<unknown> => {
      const text = await client!.get(key).string();
      return text === null ? undefined : (JSON.parse(text) as Record<string, unknown>)['models'];
    };
    await waitFor(async () => (await models()) !== undefined, 30000, 'the registration');
    expect(await models()).to.deep.equal(['qwen3', 'sql-lora']);
    const post = (path: string, body: unknown): Promise<Response> => fetch(`http://${name}${path}`, { method: 'POST', body: JSON.stringify(body) });
    expect((await post('/v1/load_lora_adapter', { lora_name: 'chat-lora', lora_path: '/adapters/chat' })).status).to.equal(200);
    await waitFor(async () => JSON.stringify(await models()) === '["qwen3","sql-lora","chat-lora"]', 10000, 'the loaded adapter in etcd');
    expect((await post('/v1/unload_lora_adapter', { lora_name: 'sql-lora' })).status).to.equal(200);
    await waitFor(async () => JSON.stringify(await models()) === '["qwen3","chat-lora"]', 10000, 'the unloaded adapter gone from etcd');
    await stopAllProcesses();

    // No list given: the engine serves any model name, so the registration says nothing (unknown).
    const plain = ServiceProcess.spawn({ name: 'engine', entry: CLI, args: [`--name=${name}`, '--block_size=4', `--etcd_addr=${etcd.address}`, '--directory_http='] });
    await plain.waitForLog((l) => l['msg'] === READY);
    const value = JSON.parse((await client.get(key).string())!) as Record<string, unknown>;
    expect(value).to.not.have.property('models');
  });

  it('--drop_every_n_batches=2: every second event batch of a rank takes its seq but never reaches a subscriber', async () => {
    const port = await findFreeEngineBase([{ type: 'DEFAULT', dpSize: 1 }], new Set());
    const name = `127.0.0.1:${port}`;
    const proc = ServiceProcess.spawn({ name: 'engine', entry: CLI, args: [`--name=${name}`, '--block_size=4', '--etcd_addr=', '--drop_every_n_batches=2'] });
    await proc.waitForLog((l) => l['msg'] === READY);
    sub = new zmq.Subscriber();
    sub.connect(`tcp://127.0.0.1:${port + 10000}`);
    sub.subscribe();
    const inbox = new Inbox(sub);
    // Each distinct one-block prompt is one batch. PUB drops messages until the SUB has joined,
    // so send prompts until one arrives: its seq is where the count starts.
    let salt = 0;
    const send = async (): Promise<void> => {
      salt++;
      const res = await fetch(`http://${name}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [salt * 10, salt * 10 + 1, salt * 10 + 2, salt * 10 + 3], max_tokens: 1 }) });
      expect(res.status).to.equal(200);
    };
    const seqOf = (m: Buffer[]): bigint => readU64be(m[1]!)!;
    const first = seqOf(await firstMessage(inbox, send));
    for (let i = 0; i < 4; i++) await send();
    const seen = [first];
    while (seen[seen.length - 1]! < first + 4n) seen.push(seqOf(await inbox.next(10000)));
    // Batch 0 is the startup clear; the dispatcher's batches 1, 2, 3, ... carry seqs 1, 2, 3, ...
    // and the even ones are dropped.
    expect(first % 2n).to.equal(1n);
    expect(seen).to.deep.equal([first, first + 2n, first + 4n]);
  });

  it('--engine_kind=vllm --replay_layout=3: the ROUTER replays history, and POST /reset_prefix_cache publishes AllBlocksCleared', async () => {
    const port = await findFreeEngineBase([{ type: 'DEFAULT', dpSize: 1 }], new Set());
    const name = `127.0.0.1:${port}`;
    const proc = ServiceProcess.spawn({
      name: 'engine',
      entry: CLI,
      args: [`--name=${name}`, '--block_size=4', '--etcd_addr=', '--engine_kind=vllm', '--replay_layout=3', '--batch_encoding=map', '--omit_dp_rank'],
    });
    await proc.waitForLog((l) => l['msg'] === READY);
    const res = await fetch(`http://${name}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [1, 2, 3, 4], max_tokens: 1 }) });
    expect(res.status).to.equal(200);
    expect((await fetch(`http://${name}/reset_prefix_cache`, { method: 'POST' })).status).to.equal(200);
    const dealer = new zmq.Dealer({ linger: 0 });
    try {
      dealer.connect(`tcp://127.0.0.1:${port + 30000}`);
      await dealer.send([Buffer.alloc(0), Buffer.alloc(8)]);
      const reply: Buffer[][] = [];
      for (;;) {
        const m = await dealer.receive();
        reply.push(m);
        if (m.length === 4 && m[2]!.equals(Buffer.alloc(8, 0xff))) break;
      }
      // ["", topic, seq, payload] per batch (no startup batch: vLLM publishes none), then the terminator.
      expect(reply.map((m) => m.length)).to.deep.equal([4, 4, 4]);
      expect(reply.slice(0, 2).map((m) => readU64be(m[2]!))).to.deep.equal([0n, 1n]);
      expect(reply[1]![3]!.includes(Buffer.from('AllBlocksCleared'))).to.equal(true);
      expect(reply[1]![3]![0], 'a map batch of two keys: {ts, events}, no rank').to.equal(0x82);
      expect(reply[2]!.map((f) => f.length)).to.deep.equal([0, 0, 8, 0]);
    } finally {
      dealer.close();
    }
  });

  it('cache-identity §6 --served_models=a,b --engine_kind=vllm: /v1/models lists b under a; a chat for b and a salted chat publish their identity', async () => {
    const port = await findFreeEngineBase([{ type: 'DEFAULT', dpSize: 1 }], new Set());
    const name = `127.0.0.1:${port}`;
    const proc = ServiceProcess.spawn({
      name: 'engine',
      entry: CLI,
      args: [`--name=${name}`, '--block_size=4', '--etcd_addr=', '--engine_kind=vllm', '--served_models=a,b', '--hybrid_sliding_window=8'],
    });
    const ready = await proc.waitForLog((l) => l['msg'] === READY);
    expect(ready).to.deep.include({ served_models: ['a', 'b'], hybrid_sliding_window: 8 });

    const models = (await (await fetch(`http://${name}/v1/models`)).json()) as { data: { id: string; parent: string | null }[] };
    expect(models.data.map((m) => [m.id, m.parent])).to.deep.equal([
      ['a', null],
      ['b', 'a'],
    ]);

    sub = new zmq.Subscriber();
    sub.connect(`tcp://127.0.0.1:${port + 10000}`);
    sub.subscribe();
    const inbox = new Inbox(sub);
    const chat = (body: Record<string, unknown>): Promise<Response> =>
      fetch(`http://${name}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages: [{ role: 'user', content: 'an identity test' }], max_tokens: 1, ...body }) });
    // Distinct base-model chats until the SUB has joined.
    let n = 0;
    await firstMessage(inbox, async () => {
      n++;
      expect((await chat({ messages: [{ role: 'user', content: `warm-up ${n}` }] })).status).to.equal(200);
    });
    const nextStores = async (): Promise<Record<string, unknown>[]> => {
      const [, , payload] = await inbox.next(10000);
      const [, events] = decode(payload!, { useBigInt64: true }) as [number, Record<string, unknown>[]];
      return events.filter((e) => e.type === 'BlockStored');
    };

    expect((await chat({ model: 'b' })).status).to.equal(200);
    const [lora0, lora1] = await nextStores();
    expect(lora0).to.deep.include({ lora_name: 'b', lora_id: 1, group_idx: 0, kv_cache_spec_kind: 'full_attention' });
    const keys = lora0!.extra_keys as unknown[];
    expect(keys.length).to.be.greaterThan(1);
    expect(keys[0]).to.deep.equal(['b']);
    for (const k of keys) expect(k).to.deep.equal(['b']);
    expect(lora1).to.deep.include({ lora_name: 'b', group_idx: 1, kv_cache_spec_kind: 'sliding_window', kv_cache_spec_sliding_window: 8 });
    expect(lora1!.block_hashes).to.deep.equal(lora0!.block_hashes);

    expect((await chat({ model: 'a', cache_salt: 'tenant-a' })).status).to.equal(200);
    const [salted] = await nextStores();
    expect(salted).to.deep.include({ lora_name: null, lora_id: null, parent_block_hash: null });
    const saltKeys = salted!.extra_keys as unknown[];
    expect(saltKeys[0]).to.deep.equal(['tenant-a']);
    for (const k of saltKeys.slice(1)) expect(k).to.equal(null);
    expect(salted!.block_hashes).to.not.deep.equal(lora0!.block_hashes);

    const missing = await chat({ model: 'c' });
    expect(missing.status).to.equal(404);
    expect(await missing.text()).to.equal('{"error":{"message":"The model `c` does not exist.","type":"NotFoundError","param":"model","code":404}}');
  });

  it('E17 --engine_kind=vllm --host=127.0.0.N: HTTP, PUB and ROUTER bind that address, and GET /kv_event_sources answers vLLM\'s bare array with wildcard hosts; --no_kv_event_sources is a 404', async () => {
    const port = await findFreeEngineBase([{ type: 'DEFAULT', dpSize: 2 }], new Set());
    const start = (host: string, extra: string[]): ServiceProcess =>
      ServiceProcess.spawn({
        name: `engine ${host}`,
        entry: CLI,
        args: [`--name=127.0.0.1:${port}`, `--host=${host}`, '--dp_size=2', '--block_size=4', '--etcd_addr=', '--engine_kind=vllm', '--topic=kv', ...extra],
      });
    // Two engines on the same ports at two loopback addresses.
    const a = start('127.0.0.21', []);
    const b = start('127.0.0.22', ['--no_kv_event_sources', '--replay_layout=none']);
    const ready = await a.waitForLog((l) => l['msg'] === READY);
    await b.waitForLog((l) => l['msg'] === READY);
    expect(ready['event_endpoints']).to.deep.equal([`tcp://127.0.0.21:${port + 10000}`, `tcp://127.0.0.21:${port + 10001}`]);
    const res = await fetch(`http://127.0.0.21:${port}/kv_event_sources`);
    expect(res.status).to.equal(200);
    expect(await res.json()).to.deep.equal([
      { data_parallel_rank: 0, endpoint: `tcp://*:${port + 10000}`, replay_endpoint: `tcp://*:${port + 30000}`, topic: 'kv' },
      { data_parallel_rank: 1, endpoint: `tcp://*:${port + 10001}`, replay_endpoint: `tcp://*:${port + 30001}`, topic: 'kv' },
    ]);
    expect((await fetch(`http://127.0.0.22:${port}/kv_event_sources`)).status).to.equal(404);
    expect((await fetch(`http://127.0.0.22:${port}/health`)).status).to.equal(200);
    // Nothing listens on the name's own address: the engines bound only theirs.
    const refused = await fetch(`http://127.0.0.1:${port}/health`).then(() => 'answered', () => 'refused');
    expect(refused).to.equal('refused');
    sub = new zmq.Subscriber({ linger: 0 });
    sub.connect(`tcp://127.0.0.21:${port + 10001}`);
    sub.subscribe();
    const inbox = new Inbox(sub);
    await waitFor(async () => {
      // Round-robin over the ranks, and a PUB drops what it sends before the SUB has joined: send until one arrives.
      await fetch(`http://127.0.0.21:${port}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [1, 2, 3, 4], max_tokens: 1 }) });
      return inbox.next(200).then(() => true, () => false);
    }, 10000, 'a batch from rank 1 at 127.0.0.21');
  });
});
