// Access control and HTTP limits on the directory's ports (discovery.md "Heartbeats", routing.md
// "HTTP API", kvcm-meta §1.2), over real servers on free ports:
//
//   grpc-js clients / ViewClient / kvctl ──gRPC (x-internal-token)──▶ DirectoryGrpcServer (+ health, reflection)
//   raw sockets / fetch ──HTTP──▶ DirectoryHttpServer (heartbeat) and MetaHttpServer (/api/*)
//
// Every server logs through one capturing pino logger at trace level, so a test can prove the
// token never reaches a log line.
import { expect } from 'chai';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { Registry } from 'prom-client';
import { DEFAULT_STREAM_LIMITS } from '../../shared/config/kv-events-config.js';
import { createLogger, type Logger } from '../../shared/log/logger.js';
import type { HttpLimits } from '../../shared/security/http-limits.js';
import { KVDIRECTORY_SERVICE_NAME, kvDirectoryServiceConstructor, loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';
import { Directory } from '../../directory-svc/directory.js';
import { DirectoryGrpcServer, type DirectoryApi } from '../../directory-svc/grpc/directory-grpc-server.js';
import { DirectoryHttpServer, HEARTBEAT_PATH, type HeartbeatSink } from '../../directory-svc/http/directory-http-server.js';
import { createMetaMetrics } from '../../meta-svc/http/meta-metrics.js';
import { MetaHttpServer } from '../../meta-svc/http/meta-http-server.js';
import { ViewPublisher } from '../../directory-svc/view/view-publisher.js';
import { InstanceListing } from '../../directory-svc/view/instance-listing.js';
import { ViewClient } from '../../router-svc/viewcache/view-client.js';
import { waitFor } from '../helpers/ports.js';
import { runToCompletion, type CompletedRun } from '../helpers/run-cli.js';

const require = createRequire(import.meta.url);
const TOKEN = 'tok-3f9a1c77e2b04d18';
const WRONG = 'tok-3f9a1c77e2b04d19';

/** Short deadlines and a fast sweep so a slow body is cut off within the test's patience. */
const TEST_LIMITS: HttpLimits = { maxHeaderBytes: 8 * 1024, headersTimeoutMs: 400, requestTimeoutMs: 400, checkIntervalMs: 50 };

type UnaryFn = (req: unknown, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void;
type KvClient = grpc.Client & Record<string, UnaryFn>;

interface Outcome {
  readonly code: number;
  readonly details: string;
}

const UNARY_RPCS: ReadonlyArray<readonly [string, object]> = [
  ['Query', { token_ids: [1, 2, 3] }],
  ['ListStreams', {}],
  ['ListInstances', {}],
  ['GetStats', {}],
];

function metadata(token: string | null): grpc.Metadata {
  const md = new grpc.Metadata();
  if (token !== null) md.set('x-internal-token', token);
  return md;
}

function unary(client: KvClient, rpc: string, req: object, token: string | null): Promise<Outcome> {
  return new Promise((resolve) => {
    client[rpc]!.call(client, req, metadata(token), (err) => resolve(err ? { code: err.code, details: err.details } : { code: grpc.status.OK, details: '' }));
  });
}

/** WatchView until its first message (OK) or its status. */
function watchFirst(client: grpc.Client, token: string | null): Promise<Outcome> {
  const watch = (client as unknown as Record<string, (req: object, md: grpc.Metadata) => grpc.ClientReadableStream<unknown>>)['WatchView']!;
  const call = watch.call(client, { router_id: 'access-test', epoch: '', version: '0' }, metadata(token));
  return new Promise((resolve) => {
    call.once('data', () => {
      call.on('error', () => undefined); // the CANCELLED that follows is ours
      call.cancel();
      resolve({ code: grpc.status.OK, details: '' });
    });
    call.once('error', (e: grpc.ServiceError) => resolve({ code: e.code, details: e.details }));
  });
}

function kvctl(args: readonly string[]): Promise<CompletedRun> {
  return runToCompletion('tools/kvctl.ts', args);
}

/** Sends `head` (and `body`) on a raw socket and collects everything until the server closes it. */
function rawExchange(port: number, head: string, body = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let got = '';
    s.on('data', (b: Buffer) => (got += b.toString('latin1')));
    s.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' ? resolve(got) : reject(e)));
    s.on('close', () => resolve(got));
    s.write(head + body);
  });
}

function statusAndBody(raw: string): { status: number; body: string } {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(raw);
  const sep = raw.indexOf('\r\n\r\n');
  return { status: m ? Number(m[1]) : 0, body: sep < 0 ? '' : raw.slice(sep + 4) };
}

/** A response that leaks a stack has `    at fn (file:line)` frames or source paths. */
function expectNoStack(text: string): void {
  expect(text).to.not.match(/\n\s+at /);
  expect(text).to.not.match(/\.(ts|js):\d+/);
  expect(text).to.not.include('node_modules');
}

const acceptingSink: HeartbeatSink = { heartbeat: () => 'accepted', invalidReport: () => undefined };

describe('access control: internal token on the directory gRPC and HTTP ports, HTTP limits', function () {
  this.timeout(60_000);
  let lines: string[] = [];
  let log: Logger;
  let clients: grpc.Client[] = [];
  let closers: Array<() => Promise<void> | void> = [];

  beforeEach(() => {
    lines = [];
    log = createLogger('access-test', 'trace', { write: (s: string) => void lines.push(s) });
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    for (const close of closers.splice(0).reverse()) await close();
  });

  /** A directory with the view publisher (WatchView) and the instance listing (ListInstances), no streams. */
  async function directoryGrpc(token: string, directory?: DirectoryApi): Promise<DirectoryGrpcServer> {
    const view = new ViewPublisher({ flushIntervalMs: 10 });
    closers.push(() => view.close());
    const disabled = Directory.disabled(() => Promise.reject(new Error('no streams')), DEFAULT_STREAM_LIMITS);
    closers.push(() => disabled.close());
    const server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory: directory ?? disabled, view, instances: new InstanceListing(null), internalApiToken: token, logger: log });
    closers.push(() => server.close(500));
    return server;
  }

  function kvClient(port: number): KvClient {
    const Ctor = kvDirectoryServiceConstructor();
    const c = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as KvClient;
    clients.push(c);
    return c;
  }

  async function heartbeatServer(opts: { token?: string; sink?: HeartbeatSink; limits?: HttpLimits } = {}): Promise<DirectoryHttpServer> {
    const http = await DirectoryHttpServer.start({
      port: 0,
      host: '127.0.0.1',
      internalApiToken: opts.token ?? TOKEN,
      heartbeats: opts.sink ?? acceptingSink,
      registry: new Registry(),
      logger: log,
      limits: opts.limits ?? TEST_LIMITS,
    });
    closers.push(() => http.close());
    return http;
  }

  async function metaServer(): Promise<number> {
    const meta = new MetaHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20, logger: log, metrics: createMetaMetrics(), limits: TEST_LIMITS });
    meta.registerRpc('getClusterInfo', () => Promise.reject(new Error('store exploded at /srv/kvcm/store.ts:42')));
    meta.markServing();
    const port = await meta.listen();
    closers.push(() => meta.close());
    return port;
  }

  it('each KvDirectory RPC without or with a wrong token is UNAUTHENTICATED "invalid internal token"; with the right one it answers', async () => {
    const server = await directoryGrpc(TOKEN);
    const client = kvClient(server.port);
    for (const [rpc, req] of UNARY_RPCS) {
      for (const sent of [null, '', WRONG, `${TOKEN} `]) {
        expect(await unary(client, rpc, req, sent), `${rpc} with ${JSON.stringify(sent)}`).to.deep.equal({ code: grpc.status.UNAUTHENTICATED, details: 'invalid internal token' });
      }
      expect(await unary(client, rpc, req, TOKEN), `${rpc} with the token`).to.deep.equal({ code: grpc.status.OK, details: '' });
    }
    for (const sent of [null, WRONG]) {
      expect(await watchFirst(client, sent), `WatchView with ${JSON.stringify(sent)}`).to.deep.equal({ code: grpc.status.UNAUTHENTICATED, details: 'invalid internal token' });
    }
    expect(await watchFirst(client, TOKEN), 'WatchView with the token: its snapshot').to.deep.equal({ code: grpc.status.OK, details: '' });
  });

  it('without --internal_api_token every RPC is open (local dev default)', async () => {
    const server = await directoryGrpc('');
    const client = kvClient(server.port);
    for (const [rpc, req] of UNARY_RPCS) expect(await unary(client, rpc, req, null), rpc).to.deep.equal({ code: grpc.status.OK, details: '' });
    expect(await watchFirst(client, WRONG)).to.deep.equal({ code: grpc.status.OK, details: '' });
  });

  it('health and reflection stay open without a token, so probes and grpcurl work', async () => {
    const server = await directoryGrpc(TOKEN);
    const loaded = grpc.loadPackageDefinition(loadKvDirectoryPackage()) as unknown as { grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } } };
    const health = new loaded.grpc.health.v1.Health(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & Record<string, UnaryFn>;
    clients.push(health);
    const answer = await new Promise<unknown>((resolve, reject) =>
      health['Check']!.call(health, { service: KVDIRECTORY_SERVICE_NAME }, new grpc.Metadata(), (err, res) => (err ? reject(err) : resolve(res))),
    );
    expect(answer).to.deep.include({ status: 'SERVING' });

    const reflectionProto = join(dirname(require.resolve('@grpc/reflection/package.json')), 'build/proto/grpc/reflection/v1/reflection.proto');
    const refl = grpc.loadPackageDefinition(protoLoader.loadSync(reflectionProto, { keepCase: true })) as unknown as {
      grpc: { reflection: { v1: { ServerReflection: grpc.ServiceClientConstructor } } };
    };
    const reflection = new refl.grpc.reflection.v1.ServerReflection(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    clients.push(reflection);
    const stream = (reflection as unknown as Record<string, () => grpc.ClientDuplexStream<unknown, Record<string, unknown>>>)['ServerReflectionInfo']!.call(reflection);
    const reply = await new Promise<Record<string, unknown>>((resolve, reject) => {
      stream.once('data', (m: Record<string, unknown>) => {
        stream.end();
        resolve(m);
      });
      stream.once('error', reject);
      stream.write({ list_services: '' });
    });
    const listed = (reply['list_services_response'] as { service: { name: string }[] }).service.map((s) => s.name);
    expect(listed).to.include(KVDIRECTORY_SERVICE_NAME);
  });

  it('the router view client with the token gets its snapshot; without it the watch is refused UNAUTHENTICATED', async () => {
    const server = await directoryGrpc(TOKEN);
    const addr = [{ host: '127.0.0.1', port: server.port }];
    const good = ViewClient.start({ directoryAddrs: addr, routerId: 'r-good', staleAfterMs: 3000, internalApiToken: TOKEN, logger: log });
    closers.push(() => good.close());
    await good.whenReady();
    expect(good.cache.needsSnapshot).to.equal(false);

    const bad = ViewClient.start({ directoryAddrs: addr, routerId: 'r-bad', staleAfterMs: 3000, logger: log, backoffBaseMs: 50, backoffMaxMs: 200 });
    closers.push(() => bad.close());
    await waitFor(() => lines.some((l) => l.includes('view: stream lost') && l.includes('UNAUTHENTICATED')), 20_000, 'the tokenless watch refused');
    expect(bad.cache.needsSnapshot).to.equal(true);
  });

  it('kvctl with the token answers (exit 0); without it one stderr line naming UNAUTHENTICATED (exit 1)', async () => {
    const server = await directoryGrpc(TOKEN);
    const addr = `--directory_addr=127.0.0.1:${server.port}`;
    const ok = await kvctl(['stats', addr, `--internal_api_token=${TOKEN}`, '--json']);
    expect(ok.code, ok.stderr).to.equal(0);
    expect(JSON.parse(ok.stdout)).to.have.property('view_epoch');
    const refused = await kvctl(['stats', addr]);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.equal(`kvctl: GetStats on 127.0.0.1:${server.port}: UNAUTHENTICATED: invalid internal token\n`);
  });

  it('heartbeat: 401 "invalid internal token" without, with a wrong, or with a repeated token; 200 with it', async () => {
    const http = await heartbeatServer();
    const url = `http://127.0.0.1:${http.port}${HEARTBEAT_PATH}`;
    const body = JSON.stringify({ name: 'a:8000', incarnation_id: 'i', load_metrics: { waiting_requests_num: 0, gpu_cache_usage_perc: 0 } });
    const post = async (headers: Record<string, string>): Promise<{ status: number; json: unknown }> => {
      const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
      return { status: res.status, json: await res.json() };
    };
    const refused = { status: 401, json: { error: 'invalid internal token' } };
    expect(await post({})).to.deep.equal(refused);
    expect(await post({ 'x-internal-token': WRONG })).to.deep.equal(refused);
    expect(await post({ 'x-internal-token': TOKEN.slice(0, -1) })).to.deep.equal(refused);
    // Two X-Internal-Token lines reach the server as one joined value: not the token.
    const twice = statusAndBody(
      await rawExchange(
        http.port,
        `POST ${HEARTBEAT_PATH} HTTP/1.1\r\nHost: x\r\nX-Internal-Token: ${TOKEN}\r\nX-Internal-Token: ${TOKEN}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
        body,
      ),
    );
    expect(twice).to.deep.equal({ status: 401, body: '{"error":"invalid internal token"}' });
    expect(await post({ 'x-internal-token': TOKEN })).to.deep.equal({ status: 200, json: { ok: true } });
  });

  it('the token (right or wrong) never appears in a log line of the gRPC, heartbeat or view client edges', async () => {
    const server = await directoryGrpc(TOKEN);
    const client = kvClient(server.port);
    await unary(client, 'GetStats', {}, WRONG);
    await unary(client, 'GetStats', {}, TOKEN);
    await watchFirst(client, WRONG);
    const http = await heartbeatServer();
    for (const t of [WRONG, TOKEN]) {
      await fetch(`http://127.0.0.1:${http.port}${HEARTBEAT_PATH}`, { method: 'POST', body: '{bad', headers: { 'x-internal-token': t } });
    }
    const view = ViewClient.start({ directoryAddrs: [{ host: '127.0.0.1', port: server.port }], routerId: 'r', staleAfterMs: 3000, internalApiToken: TOKEN, logger: log });
    closers.push(() => view.close());
    await view.whenReady();
    // The refusals were logged (so the check below looked at real lines), without the token.
    expect(lines.some((l) => l.includes('invalid internal token'))).to.equal(true);
    // And where a token does reach a log object, pino redacts it.
    log.info({ headers: { 'x-internal-token': TOKEN }, metadata: { 'x-internal-token': TOKEN } }, 'request');
    expect(lines.some((l) => l.includes('[redacted]'))).to.equal(true);
    for (const l of lines) {
      expect(l).to.not.include(TOKEN);
      expect(l).to.not.include(WRONG);
    }
  });

  it('a body trickled past the request deadline is cut off with 408 (or the connection closed), on the heartbeat and MetaService ports', async () => {
    const http = await heartbeatServer();
    const meta = await metaServer();
    for (const [port, path] of [
      [http.port, HEARTBEAT_PATH],
      [meta, '/api/getClusterInfo'],
    ] as const) {
      // 1000 bytes promised, one sent, then silence: only the server's deadline ends this exchange.
      const raw = await rawExchange(port, `POST ${path} HTTP/1.1\r\nHost: x\r\nX-Internal-Token: ${TOKEN}\r\nContent-Length: 1000\r\n\r\n`, '{');
      const { status, body } = statusAndBody(raw);
      if (raw !== '') {
        expect(status, `${path}: ${raw}`).to.equal(408);
        expectNoStack(body);
      }
    }
    expect(lines.some((l) => l.includes('"status":408'))).to.equal(true);
  });

  it('headers over 8 KiB are refused 431 with a fixed JSON body: the heartbeat port names it, the MetaService answers exactly {}', async () => {
    const http = await heartbeatServer({ limits: { ...TEST_LIMITS, headersTimeoutMs: 10_000, requestTimeoutMs: 10_000 } });
    const meta = await metaServer();
    const big = 'x'.repeat(16 * 1024);
    const h = await fetch(`http://127.0.0.1:${http.port}/health`, { headers: { 'x-padding': big } });
    expect(h.status).to.equal(431);
    expect(await h.json()).to.deep.equal({ error: 'request headers too large' });
    const m = await fetch(`http://127.0.0.1:${meta}/health`, { headers: { 'x-padding': big } });
    expect(m.status).to.equal(431);
    expect(await m.text()).to.equal('{}');
    // Just under the limit is served.
    expect((await fetch(`http://127.0.0.1:${http.port}/health`, { headers: { 'x-padding': 'x'.repeat(4096) } })).status).to.equal(200);
  });

  it('error responses carry no stack: a failing heartbeat sink, a throwing gRPC handler, a throwing MetaService handler, an unparsable request', async () => {
    const failing: HeartbeatSink = {
      heartbeat: () => {
        throw new Error('sink exploded at /srv/directory/instance-table.ts:99');
      },
      invalidReport: () => undefined,
    };
    const http = await heartbeatServer({ sink: failing });
    const res = await fetch(`http://127.0.0.1:${http.port}${HEARTBEAT_PATH}`, {
      method: 'POST',
      headers: { 'x-internal-token': TOKEN },
      body: JSON.stringify({ name: 'a:8000', load_metrics: { waiting_requests_num: 0, gpu_cache_usage_perc: 0 } }),
    });
    expect(res.status).to.equal(500);
    expect(await res.json()).to.deep.equal({ error: 'internal error' });

    const garbage = statusAndBody(await rawExchange(http.port, 'NOT HTTP AT ALL\r\n\r\n'));
    expect(garbage).to.deep.equal({ status: 400, body: '{"error":"bad request"}' });

    const broken: DirectoryApi = {
      query: () => ({ input_tokens: 0, block_size: 0, matches: [] }) as unknown as ReturnType<DirectoryApi['query']>,
      listStreams: () => [],
      stats: () => {
        throw new Error('stats exploded');
      },
    };
    const server = await directoryGrpc(TOKEN, broken);
    const out = await unary(kvClient(server.port), 'GetStats', {}, TOKEN);
    expect(out.code).to.equal(grpc.status.INTERNAL);
    expectNoStack(out.details);

    const meta = await metaServer();
    const m = await fetch(`http://127.0.0.1:${meta}/api/getClusterInfo`, { method: 'POST', body: '{}' });
    expect(m.status).to.equal(200);
    const text = await m.text();
    expectNoStack(text);
    expect(JSON.parse(text)).to.have.nested.property('header.status.message', 'internal error');
  });
});
