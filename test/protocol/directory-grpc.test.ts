// architecture.md "The view stream (proto/)" diagnostics: KvDirectory Query / ListStreams /
// GetStats, the standard health service and reflection, through a real grpc-js client over TCP.
// Streams are real StreamSubscribers fed by the engine simulator's RankPublisher:
//
//   RankPublisher rank r ──PUB/ROUTER──▶ StreamSubscriber ──▶ Directory ──▶ DirectoryGrpcServer
//                                                                              ▲ grpc-js client
import { expect } from 'chai';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { DEFAULT_STREAM_LIMITS, validateKvEventsConfig } from '../../shared/config/kv-events-config.js';
import { Directory, type DirectoryStreamFactory } from '../../directory-svc/directory.js';
import { DirectoryGrpcServer } from '../../directory-svc/grpc/directory-grpc-server.js';
import { KVDIRECTORY_SERVICE_NAME, loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';
import type { WireGetStatsResponse, WireListStreamsResponse, WireQueryResponse } from '../../directory-svc/grpc/kvdirectory-wire.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import { freePort, waitFor } from '../helpers/ports.js';

const require = createRequire(import.meta.url);

type Unary<Req, Res> = (req: Req, cb: (err: grpc.ServiceError | null, res: Res) => void) => void;

interface KvDirectoryClient extends grpc.Client {
  Query: Unary<{ token_ids: number[] }, WireQueryResponse>;
  ListStreams: Unary<Record<string, never>, WireListStreamsResponse>;
  GetStats: Unary<Record<string, never>, WireGetStatsResponse>;
}
interface HealthClient extends grpc.Client {
  Check: Unary<{ service: string }, { status: string }>;
}

function call<Req, Res>(fn: Unary<Req, Res>, client: grpc.Client, req: Req): Promise<Res> {
  return new Promise((resolve, reject) => fn.call(client, req, (err, res) => (err ? reject(err) : resolve(res))));
}

function clients(port: number): { kv: KvDirectoryClient; health: HealthClient; reflection: grpc.Client & Record<string, unknown> } {
  const loaded = grpc.loadPackageDefinition(loadKvDirectoryPackage()) as unknown as {
    kvdirectory: { v1: { KvDirectory: grpc.ServiceClientConstructor } };
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  };
  const addr = `127.0.0.1:${port}`;
  const creds = grpc.credentials.createInsecure();
  const reflectionProto = join(dirname(require.resolve('@grpc/reflection/package.json')), 'build/proto/grpc/reflection/v1/reflection.proto');
  const reflPkg = grpc.loadPackageDefinition(protoLoader.loadSync(reflectionProto, { keepCase: true })) as unknown as {
    grpc: { reflection: { v1: { ServerReflection: grpc.ServiceClientConstructor } } };
  };
  return {
    kv: new loaded.kvdirectory.v1.KvDirectory(addr, creds) as unknown as KvDirectoryClient,
    health: new loaded.grpc.health.v1.Health(addr, creds) as unknown as HealthClient,
    reflection: new reflPkg.grpc.reflection.v1.ServerReflection(addr, creds) as unknown as grpc.Client & Record<string, unknown>,
  };
}

const subscriberFactory: DirectoryStreamFactory = (cfg, limits) => StreamSubscriber.create(cfg, limits);

describe('architecture.md KvDirectory gRPC diagnostics', () => {
  let server: DirectoryGrpcServer | null = null;
  let directory: Directory | null = null;
  let open: grpc.Client[] = [];
  let publishers: RankPublisher[] = [];

  afterEach(async () => {
    for (const c of open) c.close();
    open = [];
    await server?.close(500);
    server = null;
    await directory?.close();
    directory = null;
    await Promise.all(publishers.map((p) => p.close()));
    publishers = [];
  });

  async function serve(d: Directory): Promise<ReturnType<typeof clients>> {
    directory = d;
    server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory: d });
    expect(server.port).to.be.greaterThan(0);
    const c = clients(server.port);
    open.push(c.kv, c.health, c.reflection);
    return c;
  }

  it('health answers SERVING for the server and for kvdirectory.v1.KvDirectory once started', async () => {
    const { health } = await serve(Directory.disabled(subscriberFactory, DEFAULT_STREAM_LIMITS));
    expect((await call(health.Check, health, { service: '' })).status).to.equal('SERVING');
    expect((await call(health.Check, health, { service: KVDIRECTORY_SERVICE_NAME })).status).to.equal('SERVING');
    const unknown = await call(health.Check, health, { service: 'nope.Svc' }).then(
      () => null,
      (e: grpc.ServiceError) => e.code,
    );
    expect(unknown).to.equal(grpc.status.NOT_FOUND);
  });

  it('reflection lists KvDirectory and health, and describes kvdirectory.proto (grpcurl works)', async () => {
    const { reflection } = await serve(Directory.disabled(subscriberFactory, DEFAULT_STREAM_LIMITS));
    const stream = (reflection['ServerReflectionInfo'] as () => grpc.ClientDuplexStream<unknown, Record<string, unknown>>).call(reflection);
    const replies: Record<string, unknown>[] = [];
    const done = new Promise<void>((resolve, reject) => {
      stream.on('data', (m: Record<string, unknown>) => {
        replies.push(m);
        if (replies.length === 2) stream.end();
      });
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    stream.write({ list_services: '' });
    stream.write({ file_containing_symbol: KVDIRECTORY_SERVICE_NAME });
    await done;
    const listed = (replies[0]!['list_services_response'] as { service: { name: string }[] }).service.map((s) => s.name);
    expect(listed).to.include.members([KVDIRECTORY_SERVICE_NAME, 'grpc.health.v1.Health']);
    const files = (replies[1]!['file_descriptor_response'] as { file_descriptor_proto: Buffer[] }).file_descriptor_proto;
    expect(files.length).to.be.greaterThan(0);
    const descriptor = Buffer.concat(files).toString('latin1');
    expect(descriptor).to.include('kvdirectory.v1');
    expect(descriptor).to.include('KvDirectory');
    expect(descriptor).to.include('QueryResponse');
  });

  it('§8 Query with the directory disabled answers zero matches; GetStats says disabled', async () => {
    const { kv } = await serve(Directory.disabled(subscriberFactory, DEFAULT_STREAM_LIMITS));
    const r = await call(kv.Query, kv, { token_ids: [1, 2, 3, 4, 5] });
    expect(r).to.deep.equal({ input_tokens: 5, block_size: 0, matches: [] });
    expect((await call(kv.ListStreams, kv, {})).streams).to.deep.equal([]);
    const stats = await call(kv.GetStats, kv, {});
    expect(stats).to.include({ directory_enabled: false, stream_source: '', streams_total: 0, queries_total: '1' });
  });

  it('routing.md token ids must be < 2^31: INVALID_ARGUMENT naming the field', async () => {
    const { kv } = await serve(Directory.disabled(subscriberFactory, DEFAULT_STREAM_LIMITS));
    const err = await call(kv.Query, kv, { token_ids: [1, 2147483647, 2147483648] }).then(
      () => null,
      (e: grpc.ServiceError) => e,
    );
    expect(err?.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(err?.details).to.equal('token_ids[2]: expected an integer in [0, 2^31), got 2147483648');
  });

  it('§5.3/P2 Query over static streams fed by the simulator: per-rank hits, never combined; ListStreams and GetStats agree', async () => {
    const base = [await freePort(), await freePort(), await freePort(), await freePort()];
    const ranks = await Promise.all(
      [0, 1].map((r) => RankPublisher.start({ eventPort: base[r]!, replayPort: base[2 + r]!, dpRank: r, blockSize: 4 })),
    );
    publishers.push(...ranks);
    const cfg = validateKvEventsConfig({
      replay_timeout_ms: 2000,
      streams: ranks.map((p, r) => ({
        instance_name: '127.0.0.1:8000',
        dp_rank: r,
        block_size: 4,
        endpoint: p.eventEndpoint,
        replay_endpoint: p.replayEndpoint,
      })),
    });
    const d = new Directory({ enabled: true, streamSource: 'static', maxStreams: cfg.maxStreams, limits: cfg.limits, createStream: subscriberFactory });
    const { kv } = await serve(d);
    for (const s of cfg.streams) await d.addStream(s);
    await Promise.all(ranks.map((p) => p.waitForSubscribers(1)));

    // §5.3 seq 0..1 on rank 0 (two blocks); rank 1 holds only block 0 of the same prompt.
    await ranks[0]!.publish([{ type: 'AllBlocksCleared' }]);
    await ranks[0]!.publish([{ type: 'BlockStored', block_hashes: [11, 12], parent_block_hash: null, token_ids: [1, 2, 3, 4, 5, 6, 7, 8], block_size: 4, medium: 'gpu' }]);
    await ranks[1]!.publish([{ type: 'AllBlocksCleared' }]);
    await ranks[1]!.publish([{ type: 'BlockStored', block_hashes: [21], parent_block_hash: null, token_ids: [1, 2, 3, 4], block_size: 4, medium: 'cpu' }]);

    const tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    const r = await waitFor(
      async () => {
        const q = await call(kv.Query, kv, { token_ids: tokens });
        return q.matches.every((m) => m.synchronized && m.sequence === '1') ? q : null;
      },
      15000,
      'both ranks synchronized at sequence 1',
    );
    expect(r.input_tokens).to.equal(10);
    expect(r.block_size).to.equal(4);
    expect(r.matches).to.deep.equal([
      {
        instance_name: '127.0.0.1:8000',
        dp_rank: 0,
        // StreamMatch.engine_kind (engines.md §1), filled in the Query answer since 6b6bc34.
        engine_kind: 'xllm',
        synchronized: true,
        sequence: '1',
        device_hit_tokens: 8,
        host_only_hit_tokens: 0,
        reusable_prefix_tokens: 8,
        device_blocks: 2,
        host_blocks: 0,
        error: '',
      },
      {
        instance_name: '127.0.0.1:8000',
        dp_rank: 1,
        engine_kind: 'xllm',
        synchronized: true,
        sequence: '1',
        device_hit_tokens: 0,
        host_only_hit_tokens: 4,
        reusable_prefix_tokens: 4,
        device_blocks: 0,
        host_blocks: 1,
        error: '',
      },
    ]);

    const { streams } = await call(kv.ListStreams, kv, {});
    expect(streams.map((s) => [s.dp_rank, s.state, s.sequence, s.entry_count])).to.deep.equal([
      [0, 'SYNCHRONIZED', '1', '2'],
      [1, 'SYNCHRONIZED', '1', '1'],
    ]);
    expect(streams[0]).to.include({ endpoint: ranks[0]!.eventEndpoint, replay_endpoint: ranks[0]!.replayEndpoint, block_size: 4, hash_seed: '1024', topic: '' });
    // Synchronized either by a snapshot recovery or by the full-state batch 0 (§7.3 restore).
    const c0 = streams[0]!.counters;
    expect(Number(c0.recoveries_ok) + Number(c0.restores)).to.be.at.least(1);
    expect(c0.sync_lost).to.be.an('object');
    expect(Number(streams[0]!.counters.batches_applied)).to.be.at.least(1);

    const stats = await call(kv.GetStats, kv, {});
    expect(stats).to.include({ directory_enabled: true, stream_source: 'static', streams_total: 2, streams_synchronized: 2 });
    expect(stats.streams_by_state).to.deep.equal({ SYNCHRONIZED: 2 });
    expect(stats).to.include({ device_blocks_total: '2', host_blocks_total: '1', entries_total: '3' });

    // Empty token ids: state and counts only (§8).
    const empty = await call(kv.Query, kv, { token_ids: [] });
    expect(empty.matches.map((m) => [m.device_hit_tokens, m.device_blocks, m.host_blocks])).to.deep.equal([
      [0, 2, 0],
      [0, 0, 1],
    ]);
  });

  it('§7 a stream whose publisher is absent reports synchronized=false with zero hits and its error', async () => {
    const [ev, rp] = [await freePort(), await freePort()];
    const d = new Directory({ enabled: true, streamSource: 'static', maxStreams: 4, limits: DEFAULT_STREAM_LIMITS, createStream: subscriberFactory });
    const { kv } = await serve(d);
    await d.addStream({ instanceName: 'gone:1', dpRank: 0, blockSize: 4, endpoint: `tcp://127.0.0.1:${ev}`, replayEndpoint: `tcp://127.0.0.1:${rp}`, topic: '', hashSeed: 1024 });
    const r = await call(kv.Query, kv, { token_ids: [1, 2, 3, 4] });
    expect(r.matches).to.have.length(1);
    expect(r.matches[0]).to.include({ synchronized: false, sequence: '-1', device_hit_tokens: 0, device_blocks: 0 });
    expect(r.matches[0]!.error).to.match(/^connecting: /);
    const { streams } = await call(kv.ListStreams, kv, {});
    expect(streams[0]).to.include({ state: 'CONNECTING', synchronized: false });
  });

  it('Directory refuses a duplicate (instance, dp_rank) and a stream beyond max_streams; removeStream drops it', async () => {
    const d = new Directory({ enabled: true, streamSource: 'static', maxStreams: 1, limits: DEFAULT_STREAM_LIMITS, createStream: subscriberFactory });
    directory = d;
    const s = { instanceName: 'a:1', dpRank: 0, blockSize: 4, endpoint: `tcp://127.0.0.1:${await freePort()}`, replayEndpoint: `tcp://127.0.0.1:${await freePort()}`, topic: '', hashSeed: 1024 };
    await d.addStream(s);
    const dup = await d.addStream(s).then(() => null, (e: { class: string }) => e.class);
    expect(dup).to.equal('duplicate_stream');
    const over = await d.addStream({ ...s, dpRank: 1 }).then(() => null, (e: { class: string }) => e.class);
    expect(over).to.equal('max_streams');
    expect(await d.removeStream('a:1', 0)).to.equal(true);
    expect(await d.removeStream('a:1', 0)).to.equal(false);
    expect(d.query([1, 2, 3, 4]).matches).to.deep.equal([]);
    const disabled = await Directory.disabled(subscriberFactory, DEFAULT_STREAM_LIMITS).addStream(s).then(() => null, (e: { class: string }) => e.class);
    expect(disabled).to.equal('disabled');
  });
});
