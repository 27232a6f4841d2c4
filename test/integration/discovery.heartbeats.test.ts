// discovery.md "Heartbeats": every answer of the table over the directory's real HTTP port,
// with the instance registered in a real etcd (so 409 vs 200 comes from the real table).
import { expect } from 'chai';
import { Etcd3 } from 'etcd3';
import { Registry } from 'prom-client';
import { DiscoveryService } from '../../directory-svc/discovery/discovery-service.js';
import { DirectoryHttpServer, HEARTBEAT_PATH } from '../../directory-svc/http/directory-http-server.js';
import { EtcdServer } from '../helpers/etcd-server.js';
import { waitFor } from '../helpers/ports.js';

const NAME = '127.0.0.1:8000';
const TOKEN = 's3cret-token';
const load = { waiting_requests_num: 3, gpu_cache_usage_perc: 0.42 };

describe('discovery.md Heartbeats (HTTP)', function () {
  this.timeout(30000);
  let etcd: EtcdServer;
  let client: Etcd3;
  let svc: DiscoveryService | null = null;
  let http: DirectoryHttpServer | null = null;

  before(async () => {
    etcd = await EtcdServer.start();
    client = new Etcd3({ hosts: etcd.clientUrl });
    await client.put(`XLLM:MIX:${NAME}`).value(JSON.stringify({ name: NAME, rpc_address: 'x:1', type: 3, incarnation_id: 'a1b2c3' }));
  });
  after(async () => {
    client.close();
    await etcd.destroy();
  });

  async function start(token: string, maxBodyBytes?: number): Promise<void> {
    const registry = new Registry();
    svc = DiscoveryService.start({
      flags: {
        etcdAddr: [{ host: '127.0.0.1', port: etcd.clientPort }],
        etcdNamespace: '',
        leaseLostHeartbeatTimeoutMs: 3000,
        detectDisconnectedInstanceIntervalS: 15,
        instanceDeleteProbeTimeoutMs: 200,
        instanceDeleteProbeAttempts: 1,
      },
      discovery: null,
      maxStreams: 128,
      streams: null,
      registry,
    });
    http = await DirectoryHttpServer.start({ port: 0, host: '127.0.0.1', internalApiToken: token, heartbeats: svc, registry, ...(maxBodyBytes ? { maxBodyBytes } : {}) });
    await waitFor(() => svc!.instance(NAME) !== null, 5000, 'registered instance');
  }

  afterEach(async () => {
    await http?.close();
    http = null;
    await svc?.close();
    svc = null;
  });

  async function post(body: string, headers: Record<string, string> = {}): Promise<{ status: number; json: unknown }> {
    const res = await fetch(`http://127.0.0.1:${http!.port}${HEARTBEAT_PATH}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
    return { status: res.status, json: await res.json() };
  }

  it('200 {"ok":true} for the spec example; load is fresh at once and the MIX role follows', async () => {
    await start('');
    const r = await post(
      JSON.stringify({ name: NAME, incarnation_id: 'a1b2c3', current_role: 'DECODE', load_metrics: load, latency_metrics: { recent_max_ttft: 35, recent_max_tbt: 9 } }),
    );
    expect(r).to.deep.equal({ status: 200, json: { ok: true } });
    const v = svc!.instance(NAME)!;
    expect(v.load).to.deep.equal({ waitingRequests: 3, gpuCacheUsage: 0.42, recentMaxTtftMs: 35, recentMaxTbtMs: 9 });
    expect(v.currentRole).to.equal('DECODE');
    expect(v.routingCandidate).to.equal(true);
  });

  it('a deprecated cache_event is accepted and ignored', async () => {
    await start('');
    expect((await post(JSON.stringify({ name: NAME, load_metrics: load, cache_event: { stored_cache: ['x'] } }))).status).to.equal(200);
  });

  it('401 when the token is set and the header is missing or different', async () => {
    await start(TOKEN);
    const body = JSON.stringify({ name: NAME, load_metrics: load });
    expect(await post(body)).to.deep.equal({ status: 401, json: { error: 'invalid internal token' } });
    expect(await post(body, { 'x-internal-token': 'wrong' })).to.deep.equal({ status: 401, json: { error: 'invalid internal token' } });
    expect(await post(body, { 'x-internal-token': `${TOKEN}x` })).to.deep.equal({ status: 401, json: { error: 'invalid internal token' } });
    expect(await post(body, { 'x-internal-token': TOKEN })).to.deep.equal({ status: 200, json: { ok: true } });
  });

  it('400 for not JSON, no name, negative or non-finite numbers, usage outside [0,1]; the instance is then no routing candidate', async () => {
    await start('');
    expect((await post(JSON.stringify({ name: NAME, load_metrics: load }))).status).to.equal(200);
    const bad = [
      'not json',
      JSON.stringify({ load_metrics: load }),
      JSON.stringify({ name: NAME, load_metrics: { waiting_requests_num: -1, gpu_cache_usage_perc: 0.1 } }),
      '{"name":"127.0.0.1:8000","load_metrics":{"waiting_requests_num":1e400}}',
      JSON.stringify({ name: NAME, load_metrics: { waiting_requests_num: 1, gpu_cache_usage_perc: 1.5 } }),
    ];
    for (const b of bad) {
      const r = await post(b);
      expect(r.status, b).to.equal(400);
      expect(r.json).to.have.property('error').that.is.a('string');
    }
    expect(svc!.instance(NAME)!.routingCandidate).to.equal(false);
  });

  it('409 for an unknown name or a stale incarnation', async () => {
    await start('');
    const conflict = { status: 409, json: { error: 'instance not registered or stale incarnation' } };
    expect(await post(JSON.stringify({ name: '127.0.0.1:9999', load_metrics: load }))).to.deep.equal(conflict);
    expect(await post(JSON.stringify({ name: NAME, incarnation_id: 'old', load_metrics: load }))).to.deep.equal(conflict);
  });

  it('413 for a body above the limit', async () => {
    await start('', 1024);
    const r = await post(JSON.stringify({ name: NAME, load_metrics: load, pad: 'x'.repeat(4096) }));
    expect(r.status).to.equal(413);
  });

  it('GET /health answers 200 and GET /metrics serves the registry', async () => {
    await start('');
    const health = await fetch(`http://127.0.0.1:${http!.port}/health`);
    expect(health.status).to.equal(200);
    await post(JSON.stringify({ name: NAME, load_metrics: load }));
    const metrics = await (await fetch(`http://127.0.0.1:${http!.port}/metrics`)).text();
    expect(metrics).to.match(/discovery_heartbeats_total\{outcome="accepted"\} 1/);
    expect(metrics).to.match(/discovery_instances\{state="ACTIVE"\} 1/);
  });
});
