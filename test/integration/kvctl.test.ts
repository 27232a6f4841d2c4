// kvctl (tools/kvctl.ts) against a real directory-svc process: two static streams fed by the
// engine simulator's RankPublishers, a real etcd holding one registration, kvctl run as a child
// process exactly as an operator runs it; the printed tables and exit codes are what is checked.
//
//   RankPublisher a:8000/0 ─ZMQ─┐
//   RankPublisher b:8000/0 ─ZMQ─┼─▶ directory-svc ◀─gRPC─ kvctl streams|instances|query|stats
//   etcd (XLLM:DEFAULT:…) ──────┘
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';
import { DirectoryGrpcServer } from '../../directory-svc/grpc/directory-grpc-server.js';
import { Directory } from '../../directory-svc/directory.js';
import { DEFAULT_STREAM_LIMITS } from '../../shared/config/kv-events-config.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import { EtcdServer } from '../helpers/etcd-server.js';
import { ServiceProcess, stopAllProcesses } from '../../shared/process/service-process.js';
import { runToCompletion, type CompletedRun } from '../helpers/run-cli.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { BLOCK_SIZE, chainTokens, stored } from '../helpers/stream-harness.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function kvctl(args: readonly string[]): Promise<CompletedRun> {
  return runToCompletion('tools/kvctl.ts', args);
}

/** Table lines split into cells on runs of 2+ spaces (no cell here contains two spaces). */
function rows(text: string): string[][] {
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split(/ {2,}/).map((c) => c.trim()));
}

/** Every left-aligned cell of `header` starts at the header's column in each line (alignment). */
function expectAligned(lines: readonly string[], header: string): void {
  const start = lines[0]!.indexOf(header);
  expect(start, `${header} in ${lines[0]}`).to.be.at.least(0);
  for (const l of lines.slice(1)) {
    expect(l[start - 1] ?? ' ', `${header} column in ${JSON.stringify(l)}`).to.equal(' ');
    expect(l[start], `${header} column in ${JSON.stringify(l)}`).to.not.equal(' ');
  }
}

describe('kvctl against a real directory-svc', function () {
  this.timeout(60000);
  let etcd: EtcdServer;
  let tmp: string;
  let pubs: RankPublisher[] = [];
  let directory: ServiceProcess;
  let addr: string;
  let httpPort: number;

  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'kvctl-'));
    etcd = await EtcdServer.start();
    const etcdClient = new Etcd3({ hosts: etcd.clientUrl });
    await etcdClient.put('XLLM:DEFAULT:a:8000').value(JSON.stringify({ name: 'a:8000', rpc_address: 'a:9000', type: 0, incarnation_id: 'inc-a', models: ['llama', 'sql-lora'] }));
    etcdClient.close();
    for (let i = 0; i < 2; i++) {
      pubs.push(await RankPublisher.start({ eventPort: await freePort(), replayPort: await freePort(), dpRank: 0, blockSize: BLOCK_SIZE, maxMessageBytes: 65_536 }));
    }
    const config = join(tmp, 'kv-events.json');
    writeFileSync(
      config,
      JSON.stringify({
        streams: pubs.map((p, i) => ({ instance_name: i === 0 ? 'a:8000' : 'b:8000', block_size: BLOCK_SIZE, endpoint: p.eventEndpoint, replay_endpoint: p.replayEndpoint })),
      }),
    );
    const grpcPort = await freePort();
    addr = `127.0.0.1:${grpcPort}`;
    httpPort = await freePort();
    directory = ServiceProcess.spawn({
      name: 'directory',
      entry: 'directory-svc/main.ts',
      cwd: ROOT,
      args: [`--grpc_port=${grpcPort}`, `--http_port=${httpPort}`, `--etcd_addr=127.0.0.1:${etcd.clientPort}`, `--kv_events_config_file=${config}`],
    });
    await directory.waitForLog((l) => l['msg'] === 'directory-svc started');
    await Promise.all(pubs.map((p) => p.waitForSubscribers(1, 20000)));
    // Stream a: three blocks in one batch once synchronized (seq 0); stream b stays empty.
    const synced = async (): Promise<boolean> => rows((await kvctl(['streams', `--directory_addr=${addr}`])).stdout).filter((r) => r[3] === 'SYNCHRONIZED').length === 2;
    await waitFor(synced, 30000, 'both streams synchronized');
    await pubs[0]!.publish([stored([11, 12, 13], null, chainTokens(0, 3))]);
    const applied = async (): Promise<boolean> => rows((await kvctl(['streams', `--directory_addr=${addr}`])).stdout)[1]?.[4] === '0';
    await waitFor(applied, 30000, 'batch 0 applied on a:8000');
  });

  after(async () => {
    await stopAllProcesses();
    await Promise.all(pubs.map((p) => p.close()));
    pubs = [];
    await etcd?.destroy();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('streams prints one aligned row per stream with state, sequence, residency and counters', async () => {
    const run = await kvctl(['streams', `--directory_addr=${addr}`]);
    expect(run.code, run.stderr).to.equal(0);
    const lines = run.stdout.split('\n').filter((l) => l !== '');
    expect(rows(run.stdout)[0]).to.deep.equal(['INSTANCE', 'DP', 'KIND', 'STATE', 'SEQ', 'DEVICE', 'HOST', 'ENTRIES', 'BATCHES', 'RECOVERIES', 'SYNC_LOST', 'SKIPPED', 'ERROR']);
    expect(rows(run.stdout).slice(1)).to.deep.equal([
      ['a:8000', '0', 'xllm', 'SYNCHRONIZED', '0', '3', '0', '3', '1', '1/0', '-', '-', '-'],
      ['b:8000', '0', 'xllm', 'SYNCHRONIZED', '-1', '0', '0', '0', '0', '1/0', '-', '-', '-'],
    ]);
    for (const h of ['STATE', 'SYNC_LOST', 'SKIPPED', 'ERROR']) expectAligned(lines, h);
  });

  it('query --tokens and --tokens_file print the same per-stream prefix hits', async () => {
    const tokens = chainTokens(0, 2).concat([99]);
    const inline = await kvctl(['query', `--directory_addr=${addr}`, `--tokens=${tokens.join(',')}`]);
    expect(inline.code, inline.stderr).to.equal(0);
    const file = join(tmp, 'tokens.txt');
    writeFileSync(file, tokens.join(' ') + '\n');
    const fromFile = await kvctl(['query', `--directory_addr=${addr}`, `--tokens_file=${file}`]);
    expect(fromFile.stdout).to.equal(inline.stdout);
    const r = rows(inline.stdout);
    expect(r[0]).to.deep.equal(['input_tokens 9, block_size 4']);
    expect(r[1]).to.deep.equal(['INSTANCE', 'DP', 'SYNC', 'SEQ', 'DEVICE_HIT', 'HOST_ONLY_HIT', 'REUSABLE', 'DEVICE', 'HOST', 'ERROR']);
    expect(r[2]).to.deep.equal(['a:8000', '0', 'yes', '0', '8', '0', '8', '3', '0', '-']);
    expect(r[3]).to.deep.equal(['b:8000', '0', 'yes', '-1', '0', '0', '0', '0', '0', '-']);
  });

  it('stats prints directory totals as aligned key/value lines', async () => {
    const run = await kvctl(['stats', `--directory_addr=${addr}`]);
    expect(run.code, run.stderr).to.equal(0);
    const kv = new Map(rows(run.stdout).map(([k, v]) => [k!, v!]));
    expect(kv.get('directory_enabled')).to.equal('true');
    expect(kv.get('stream_source')).to.equal('static');
    expect(kv.get('streams_total')).to.equal('2');
    expect(kv.get('streams_synchronized')).to.equal('2');
    expect(kv.get('streams_by_state')).to.equal('SYNCHRONIZED:2');
    expect(kv.get('device_blocks_total')).to.equal('3');
    expect(kv.get('view_epoch')).to.be.a('string').and.not.equal('-');
    expect(kv.get('view_watchers')).to.equal('0');
  });

  it('instances prints the etcd registration with its state and no load before a heartbeat', async () => {
    const run = await kvctl(['instances', `--directory_addr=${addr}`]);
    expect(run.code, run.stderr).to.equal(0);
    const r = rows(run.stdout);
    expect(r[0]).to.deep.equal(['etcd: connected']);
    expect(r[1]).to.deep.equal(['NAME', 'SOURCE', 'TYPE', 'ROLE', 'STATE', 'SCHEDULABLE', 'DP', 'INCARNATION', 'WAITING', 'GPU_CACHE', 'HEARTBEAT_AGE', 'MODELS', 'EXCLUDED']);
    expect(r[2]!.slice(0, 11)).to.deep.equal(['a:8000', 'etcd', 'DEFAULT', '-', 'ACTIVE', 'yes', '1', 'inc-a', '-', '-', '-']);
    // cache-identity §1: the etcd value's models, the adapter marked.
    expect(r[2]![11]).to.equal('llama +sql-lora');
  });

  it('CI5 query --model keeps the streams of instances serving it or with an unknown list (b:8000 is a static stream: unknown); an adapter is keyed as its LoRA chain; a bad model is INVALID_ARGUMENT', async () => {
    const tokens = chainTokens(0, 2);
    const q = async (...extra: string[]): Promise<string[][]> => {
      const run = await kvctl(['query', `--directory_addr=${addr}`, `--tokens=${tokens.join(',')}`, ...extra]);
      expect(run.code, run.stderr).to.equal(0);
      return rows(run.stdout).slice(2).map((r) => [r[0]!, r[4]!]);
    };
    expect(await q('--model=llama')).to.deep.equal([['a:8000', '8'], ['b:8000', '0']]);
    expect(await q('--model=qwen')).to.deep.equal([['b:8000', '0']]);
    expect(await q('--model=sql-lora')).to.deep.equal([['a:8000', '0'], ['b:8000', '0']]);
    const bad = await kvctl(['query', `--directory_addr=${addr}`, '--tokens=1', '--model=a\tb']);
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.match(/^kvctl: Query on 127\.0\.0\.1:\d+: INVALID_ARGUMENT: model: expected no control characters/);
  });

  it('the process serves the same streams\' §10 series on GET /metrics (main.ts wires StreamMetrics)', async () => {
    const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    expect(text).to.include('kv_batches_applied_total{instance="a:8000",dp_rank="0"} 1');
    expect(text).to.include('kv_index_blocks{instance="a:8000",dp_rank="0",tier="device"} 3');
    expect(text).to.include('kv_stream_state{instance="b:8000",dp_rank="0"} 3');
    expect(text).to.include('process_cpu_user_seconds_total');
  });

  it('--json prints the raw gRPC answer (64-bit values as decimal strings)', async () => {
    const run = await kvctl(['streams', `--directory_addr=${addr}`, '--json']);
    expect(run.code, run.stderr).to.equal(0);
    const res = JSON.parse(run.stdout) as { streams: { instance_name: string; sequence: string; device_blocks: string }[] };
    expect(res.streams.map((s) => [s.instance_name, s.sequence, s.device_blocks])).to.deep.equal([
      ['a:8000', '0', '3'],
      ['b:8000', '-1', '0'],
    ]);
  });

  it('an unreachable directory is one stderr line and exit 1; a bad flag one line and exit 2', async () => {
    const down = await kvctl(['stats', `--directory_addr=127.0.0.1:${await freePort()}`, '--timeout_ms=2000']);
    expect(down.code).to.equal(1);
    expect(down.stdout).to.equal('');
    expect(down.stderr.trimEnd().split('\n')).to.have.length(1);
    expect(down.stderr).to.match(/^kvctl: GetStats on 127\.0\.0\.1:\d+: UNAVAILABLE: /);

    const bad = await kvctl(['query', `--directory_addr=${addr}`, '--tokens=1,-2']);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.equal('kvctl: invalid --tokens: token id #2 "-2" is not an integer in [0, 2^31)\n');
  });

  it('instances against a directory without ListInstances says so from the UNIMPLEMENTED status', async () => {
    // A real gRPC server with no view publisher answers ListInstances UNIMPLEMENTED (an older directory).
    const bare = Directory.disabled(() => Promise.reject(new Error('no streams')), DEFAULT_STREAM_LIMITS);
    const server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory: bare });
    try {
      const run = await kvctl(['instances', `--directory_addr=127.0.0.1:${server.port}`]);
      expect(run.code).to.equal(1);
      expect(run.stderr).to.equal(`kvctl: directory at 127.0.0.1:${server.port} does not support ListInstances yet\n`);
    } finally {
      await server.close();
      await bare.close();
    }
  });
});
