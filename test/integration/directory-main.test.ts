// architecture.md "Processes and flags": the directory-svc process itself. Spawned as
// `node --import tsx directory-svc/main.ts` so no build is needed (dist/ runs the same code).
// Bad flags and configs exit 2 with one stderr line naming the field; a good config serves gRPC
// on a free port and stops with exit 0 on SIGTERM / SIGINT.
import { expect } from 'chai';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';
import type { WireQueryResponse } from '../../directory-svc/grpc/kvdirectory-wire.js';
import type { ProtoGrpcType } from '../../proto/generated/kvdirectory.js';
import type { KvDirectoryClient } from '../../proto/generated/kvdirectory/v1/KvDirectory.js';
import type { ListStreamsResponse__Output } from '../../proto/generated/kvdirectory/v1/ListStreamsResponse.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { ServiceProcess } from '../../shared/process/service-process.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A directory-svc process of this test (`node --import tsx`, so no build is needed). */
function startMain(args: string[], env: Record<string, string>): ServiceProcess {
  return ServiceProcess.spawn({ name: 'directory-svc', entry: 'directory-svc/main.ts', args, cwd: ROOT, env: { ...process.env, ...env } });
}

function textOf(r: ServiceProcess, stream: 'stdout' | 'stderr'): string {
  return r.linesOf(stream).join('\n');
}

async function exitCode(r: ServiceProcess): Promise<number | null> {
  return (await r.waitForExit()).code;
}


function kvClient(port: number): KvDirectoryClient {
  const loaded = grpc.loadPackageDefinition(loadKvDirectoryPackage()) as unknown as ProtoGrpcType;
  return new loaded.kvdirectory.v1.KvDirectory(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
}

function query(client: KvDirectoryClient, tokenIds: number[]): Promise<WireQueryResponse> {
  return new Promise((resolve, reject) => client.Query({ token_ids: tokenIds }, (e, r) => (e ? reject(e) : resolve(r!))));
}

describe('architecture.md directory-svc process (main.ts)', () => {
  let runs: ServiceProcess[] = [];
  let tmp = '';
  let publishers: RankPublisher[] = [];
  let clients: grpc.Client[] = [];

  beforeEach(() => {
    tmp = mkdtempSync(join(tmpdir(), 'dirmain-'));
  });
  afterEach(async () => {
    for (const c of clients) c.close();
    clients = [];
    await Promise.all(runs.map((r) => r.kill()));
    runs = [];
    await Promise.all(publishers.map((p) => p.close()));
    publishers = [];
    rmSync(tmp, { recursive: true, force: true });
  });

  function main(args: string[], env: Record<string, string> = {}): ServiceProcess {
    const r = startMain(args, env);
    runs.push(r);
    return r;
  }

  async function expectBadInput(args: string[], line: string | RegExp): Promise<void> {
    const r = main(args);
    expect(await exitCode(r)).to.equal(2);
    const lines = r.linesOf('stderr');
    expect(lines, textOf(r, 'stderr')).to.have.length(1);
    if (typeof line === 'string') expect(lines[0]).to.equal(line);
    else expect(lines[0]).to.match(line);
    expect(textOf(r, 'stdout')).to.equal('');
  }

  function writeConfig(json: unknown): string {
    const p = join(tmp, 'kv-events.json');
    writeFileSync(p, typeof json === 'string' ? json : JSON.stringify(json));
    return p;
  }

  it('--help prints every flag and exits 0', async () => {
    const r = main(['--help']);
    expect(await exitCode(r)).to.equal(0);
    expect(textOf(r, 'stdout')).to.match(/^Usage: node dist\/directory-svc\/main\.js/);
    for (const f of ['--etcd_addr', '--kv_events_config_file', '--grpc_port', '--http_port', '--log_level']) {
      expect(textOf(r, 'stdout')).to.include(`${f}=`);
    }
    expect(textOf(r, 'stderr')).to.equal('');
  });

  it('a former MetaService flag exits 2 with one line naming meta-svc and its replacement flag', async () => {
    await expectBadInput(['--meta_http_port=7000'], '--meta_http_port moved to meta-svc: run node dist/meta-svc/main.js --http_port=7000');
    await expectBadInput(['--meta_db=/var/kvcm.db'], '--meta_db moved to meta-svc: run node dist/meta-svc/main.js --meta_store=sqlite:/var/kvcm.db');
    await expectBadInput(['--meta_config_file=m.json'], '--meta_config_file moved to meta-svc: run node dist/meta-svc/main.js --meta_config_file=m.json');
  });

  it('a bad flag value exits 2 with one line naming the flag', async () => {
    await expectBadInput(['--grpc_port=abc'], 'invalid --grpc_port: expected an integer in 1..65535, got "abc"');
  });

  it('an unknown flag exits 2 with one line', async () => {
    await expectBadInput(['--grpc-port=5'], 'unknown flag --grpc-port (did you mean --grpc_port?)');
  });

  it('§9 a bad kv-events config exits 2 with one line naming the field', async () => {
    const p = writeConfig({ streams: [{ instance_name: 'a:1', endpoint: 'tcp://*:5557', replay_endpoint: 'tcp://h:5558' }] });
    await expectBadInput([`--kv_events_config_file=${p}`], 'invalid --kv_events_config_file: streams[0].endpoint: expected a connectable tcp://host:port, got "tcp://*:5557"');
  });

  it('§9 an unknown config field, broken JSON or a missing file exits 2 with one line', async () => {
    await expectBadInput([`--kv_events_config_file=${writeConfig({ max_streams: 4, bogus: 1 })}`], /^invalid --kv_events_config_file: bogus: unknown field/);
    await expectBadInput([`--kv_events_config_file=${writeConfig('{"max_streams": 4,')}`], /^invalid --kv_events_config_file: not valid JSON: /);
    await expectBadInput([`--kv_events_config_file=${join(tmp, 'absent.json')}`], /^invalid --kv_events_config_file: cannot read ".*absent\.json" \(ENOENT\)$/);
  });

  it('an empty --kv_events_config_file warns once, serves Query with zero matches, and SIGTERM exits 0', async () => {
    const [grpcPort, httpPort] = [await freePort(), await freePort()];
    const r = main([`--grpc_port=${grpcPort}`, `--http_port=${httpPort}`]);
    await waitFor(() => textOf(r, 'stdout').includes('directory-svc started') || !r.isRunning, 20000, 'start log line');
    const logs = r.linesOf('stdout').map((l) => JSON.parse(l) as { level: number; msg: string });
    expect(logs.filter((l) => l.level === 40 && /directory disabled/.test(l.msg))).to.have.length(1);
    const client = kvClient(grpcPort);
    clients.push(client);
    expect(await query(client, [1, 2, 3, 4])).to.deep.equal({ input_tokens: 4, block_size: 0, matches: [] });
    r.signal('SIGTERM');
    expect(await exitCode(r)).to.equal(0);
    expect(textOf(r, 'stdout')).to.include('"msg":"stopped"');
  });

  it('a --grpc_port already in use is a start failure: one fatal log line, exit 1', async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '0.0.0.0', resolve));
    try {
      const port = (busy.address() as { port: number }).port;
      const r = main([`--grpc_port=${port}`, `--http_port=${await freePort()}`]);
      expect(await exitCode(r)).to.equal(1);
      const fatal = r.linesOf('stdout').filter((l) => l.includes('"level":60'));
      expect(fatal).to.have.length(1);
      expect(fatal[0]).to.include('grpc_bind: cannot bind');
    } finally {
      await new Promise<void>((resolve) => busy.close(() => resolve()));
    }
  });

  it('a good static config on free ports: the stream synchronizes from the simulator; SIGINT exits 0', async () => {
    const [ev, rp, grpcPort, httpPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const pub = await RankPublisher.start({ eventPort: ev, replayPort: rp, dpRank: 0, blockSize: 4, topic: 'xllm-kv' });
    publishers.push(pub);
    const p = writeConfig({
      streams: [{ instance_name: '127.0.0.1:8000', block_size: 4, topic: 'xllm-kv', endpoint: pub.eventEndpoint, replay_endpoint: pub.replayEndpoint }],
    });
    const r = main([`--kv_events_config_file=${p}`, `--grpc_port=${grpcPort}`, `--http_port=${httpPort}`, '--log_level=warn']);
    await pub.waitForSubscribers(1, 20000);
    await pub.publish([{ type: 'AllBlocksCleared' }]);
    await pub.publish([{ type: 'BlockStored', block_hashes: [11, 12], parent_block_hash: null, token_ids: [1, 2, 3, 4, 5, 6, 7, 8], block_size: 4, medium: 'gpu' }]);
    const client = kvClient(grpcPort);
    clients.push(client);
    const answer = await waitFor(
      async () => {
        const q = await query(client, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]).catch(() => null);
        return q !== null && q.matches[0]?.sequence === '1' ? q : null;
      },
      20000,
      'stream synchronized at sequence 1',
    );
    expect(answer.block_size).to.equal(4);
    expect(answer.matches[0]).to.include({ instance_name: '127.0.0.1:8000', dp_rank: 0, synchronized: true, device_hit_tokens: 8, reusable_prefix_tokens: 8 });
    r.signal('SIGINT');
    expect(await exitCode(r)).to.equal(0);
    expect(textOf(r, 'stderr')).to.equal('');
  });

  it('engines.md §1 a static vllm stream without replay_endpoint: synchronized from its seq 0, ListStreams shows its kind', async () => {
    const [ev, grpcPort, httpPort] = [await freePort(), await freePort(), await freePort()];
    const pub = await RankPublisher.start({ eventPort: ev, replayPort: await freePort(), dpRank: 0, blockSize: 4, engineKind: 'vllm', replayLayout: 'none', batchForm: { encoding: 'map', omitDpRank: true } });
    publishers.push(pub);
    const p = writeConfig({ streams: [{ instance_name: 'vllm-0', block_size: 4, engine_kind: 'vllm', endpoint: pub.eventEndpoint }] });
    const r = main([`--kv_events_config_file=${p}`, `--grpc_port=${grpcPort}`, `--http_port=${httpPort}`, '--log_level=warn']);
    await pub.waitForSubscribers(1, 20000);
    await pub.publish([{ type: 'BlockStored', block_hashes: [11], parent_block_hash: null, token_ids: [1, 2, 3, 4], block_size: 4, medium: 'GPU' }]);
    const client = kvClient(grpcPort);
    clients.push(client);
    const listed = await waitFor(
      async () => {
        const l = await new Promise<ListStreamsResponse__Output>((resolve, reject) => client.ListStreams({}, (e, res) => (e ? reject(e) : resolve(res!)))).catch(() => null);
        return l !== null && l.streams[0]?.sequence === '0' ? l : null;
      },
      20000,
      'the vllm stream synchronized at sequence 0',
    );
    expect(listed.streams[0]).to.include({ instance_name: 'vllm-0', engine_kind: 'vllm', replay_endpoint: '', synchronized: true });
    r.signal('SIGINT');
    expect(await exitCode(r)).to.equal(0);
  });
});
