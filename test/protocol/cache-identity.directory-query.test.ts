// cache-identity §2 on the directory's gRPC Query: `model` scopes the answer to the instances
// serving it (or with an unknown list), an adapter's name keys the prompt as its LoRA chain,
// `cache_salt` salts block 0, an unknown model is NOT_FOUND with vLLM's message, and bad values are
// INVALID_ARGUMENT naming the field. Real streams over TCP ZeroMQ, a real grpc-js client:
//
//   RankPublisher (127.0.0.1:8000) ──PUB/ROUTER──▶ StreamSubscriber ─┐
//   RankPublisher (127.0.0.1:9000) ──PUB/ROUTER──▶ StreamSubscriber ─┴▶ Directory ──▶ DirectoryGrpcServer
//                                         served-model lists (the test's table) ──┘        ▲ grpc-js client
import { expect } from 'chai';
import * as grpc from '@grpc/grpc-js';
import { validateKvEventsConfig } from '../../shared/config/kv-events-config.js';
import { Directory, type DirectoryStreamFactory } from '../../directory-svc/directory.js';
import { DirectoryGrpcServer } from '../../directory-svc/grpc/directory-grpc-server.js';
import type { WireQueryResponse } from '../../directory-svc/grpc/kvdirectory-wire.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import type { ListedInstance } from '../../shared/view/model-scope.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import { connectKvDirectory } from '../helpers/kv-directory-client.js';
import { freePort, waitFor } from '../helpers/ports.js';

type Unary<Req, Res> = (req: Req, cb: (err: grpc.ServiceError | null, res: Res) => void) => void;
interface QueryClient extends grpc.Client {
  Query: Unary<{ token_ids: number[]; model?: string; cache_salt?: string }, WireQueryResponse>;
}

const LLAMA = '127.0.0.1:8000';
const QWEN = '127.0.0.1:9000';
const TOKENS = [1, 2, 3, 4, 5, 6, 7, 8];
const subscriberFactory: DirectoryStreamFactory = (cfg, limits) => StreamSubscriber.create(cfg, limits);

describe('cache-identity §2 the directory Query with model and cache_salt', () => {
  let server: DirectoryGrpcServer | null = null;
  let directory: Directory | null = null;
  let client: QueryClient | null = null;
  let publishers: RankPublisher[] = [];
  /** The instance table's lists as the server reads them on each Query. */
  let lists: ListedInstance[] = [];

  beforeEach(async function () {
    this.timeout(30000);
    publishers = await Promise.all([0, 1].map(async () => RankPublisher.start({ eventPort: await freePort(), replayPort: await freePort(), dpRank: 0, blockSize: 4 })));
    const cfg = validateKvEventsConfig({
      replay_timeout_ms: 2000,
      streams: [LLAMA, QWEN].map((name, i) => ({ instance_name: name, dp_rank: 0, block_size: 4, endpoint: publishers[i]!.eventEndpoint, replay_endpoint: publishers[i]!.replayEndpoint })),
    });
    directory = new Directory({ enabled: true, streamSource: 'static', maxStreams: cfg.maxStreams, limits: cfg.limits, createStream: subscriberFactory });
    server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory, servedModels: () => lists });
    client = connectKvDirectory<QueryClient>(server.port);
    for (const s of cfg.streams) await directory.addStream(s);
    await Promise.all(publishers.map((p) => p.waitForSubscribers(1)));
    // The same plain chain on both engines.
    for (const p of publishers) {
      await p.publish([{ type: 'AllBlocksCleared' }]);
      await p.publish([{ type: 'BlockStored', block_hashes: [11, 12], parent_block_hash: null, token_ids: TOKENS, block_size: 4, medium: 'gpu' }]);
    }
    await waitFor(async () => (await query({})).matches.every((m) => m.synchronized && m.device_hit_tokens === 8), 15000, 'both streams credited');
    lists = [
      { name: LLAMA, models: [{ name: 'llama', parent: null }, { name: 'sql-lora', parent: 'llama' }] },
      { name: QWEN, models: [{ name: 'qwen', parent: null }] },
    ];
  });

  afterEach(async () => {
    client?.close();
    client = null;
    await server?.close(500);
    server = null;
    await directory?.close();
    directory = null;
    await Promise.all(publishers.map((p) => p.close()));
    publishers = [];
    lists = [];
  });

  function query(identity: { model?: string; cache_salt?: string }): Promise<WireQueryResponse> {
    return new Promise((resolve, reject) => client!.Query({ token_ids: TOKENS, ...identity }, (e, r) => (e ? reject(e) : resolve(r))));
  }

  async function refusal(identity: { model?: string; cache_salt?: string }): Promise<{ code: number; details: string }> {
    try {
      await query(identity);
    } catch (e) {
      const err = e as grpc.ServiceError;
      return { code: err.code, details: err.details };
    }
    throw new Error('expected the Query to be refused');
  }

  const rows = (r: WireQueryResponse): [string, number][] => r.matches.map((m) => [m.instance_name, m.device_hit_tokens]);

  it('CI5 a base model lists only the streams of instances serving it; other models\' streams are left out, not zeroed', async () => {
    expect(rows(await query({}))).to.deep.equal([[LLAMA, 8], [QWEN, 8]]);
    expect(rows(await query({ model: 'llama' }))).to.deep.equal([[LLAMA, 8]]);
    const qwen = await query({ model: 'qwen' });
    expect(rows(qwen)).to.deep.equal([[QWEN, 8]]);
    expect(qwen.block_size).to.equal(4);
  });

  it('CI1 an adapter request is keyed as its LoRA chain: no credit on base blocks, and only on the adapter\'s instances', async () => {
    expect(rows(await query({ model: 'sql-lora' }))).to.deep.equal([[LLAMA, 0]]);
  });

  it('CI2 a salted request gets no credit on an unsalted chain; empty strings mean absent', async () => {
    expect(rows(await query({ cache_salt: 'tenant-a' }))).to.deep.equal([[LLAMA, 0], [QWEN, 0]]);
    expect(rows(await query({ model: 'llama', cache_salt: 'tenant-a' }))).to.deep.equal([[LLAMA, 0]]);
    expect(rows(await query({ model: '', cache_salt: '' }))).to.deep.equal([[LLAMA, 8], [QWEN, 8]]);
  });

  it("CI5 a model no instance lists while every list is known is NOT_FOUND with vLLM's message", async () => {
    expect(await refusal({ model: 'mistral' })).to.deep.equal({ code: grpc.status.NOT_FOUND, details: 'The model `mistral` does not exist.' });
  });

  it('CI5 an instance with an unknown list (or none in the table) is in scope for every model', async () => {
    lists = [lists[0]!, { name: QWEN, models: null }];
    expect(rows(await query({ model: 'mistral' }))).to.deep.equal([[QWEN, 8]]);
    lists = [lists[0]!]; // QWEN's streams are static: not in the table, so unknown
    expect(rows(await query({ model: 'mistral' }))).to.deep.equal([[QWEN, 8]]);
    expect(rows(await query({ model: 'llama' }))).to.deep.equal([[LLAMA, 8], [QWEN, 8]]);
  });

  it('bad values are INVALID_ARGUMENT naming the field', async () => {
    expect(await refusal({ model: 'llama\n' })).to.deep.equal({ code: grpc.status.INVALID_ARGUMENT, details: 'model: expected no control characters, got "llama\\n"' });
    expect(await refusal({ cache_salt: 'x'.repeat(4097) })).to.deep.equal({ code: grpc.status.INVALID_ARGUMENT, details: 'cache_salt: expected at most 4096 characters, got 4097' });
  });
});
