// discovery.md "Instance states" and "etcd keys" end to end: a real etcd started by the test,
// the real DiscoveryService and HTTP port, and simulated engines (EngineControl) that register
// with leases, heartbeat and serve /health. Timings come in through the flags, so the lifecycle
// runs in about a second per step.
//
//   EngineControl ──lease PUT──▶ etcd ──watch──▶ DiscoveryService ◀──heartbeat── EngineControl
//        ▲ GET /health (delete probe) ─────────────────┘
import { expect } from 'chai';
import { Etcd3 } from 'etcd3';
import { Registry } from 'prom-client';
import { DiscoveryService, type DiscoveryFlags } from '../../directory-svc/discovery/discovery-service.js';
import type { InstanceChange } from '../../directory-svc/discovery/instance-table.js';
import { DirectoryHttpServer } from '../../directory-svc/http/directory-http-server.js';
import { EngineControl, type EngineControlOptions } from '../../tools/engine-sim/engine-control.js';
import { EtcdServer } from '../helpers/etcd-server.js';
import { freePort, waitFor } from '../helpers/ports.js';

const NAMESPACE = 'lifecycle-test';

describe('discovery.md Instance states (real etcd)', function () {
  this.timeout(60000);
  let etcd: EtcdServer;
  let svc: DiscoveryService | null = null;
  let http: DirectoryHttpServer | null = null;
  let engines: EngineControl[] = [];
  let raw: Etcd3 | null = null;
  let changes: InstanceChange[] = [];

  before(async () => {
    etcd = await EtcdServer.start();
  });
  after(async () => {
    await etcd.destroy();
  });

  async function startDirectory(overrides: Partial<DiscoveryFlags> = {}): Promise<void> {
    const flags: DiscoveryFlags = {
      etcdAddr: [{ host: '127.0.0.1', port: etcd.clientPort }],
      etcdNamespace: NAMESPACE,
      leaseLostHeartbeatTimeoutMs: 400,
      detectDisconnectedInstanceIntervalS: 1,
      instanceDeleteProbeTimeoutMs: 200,
      instanceDeleteProbeAttempts: 2,
      ...overrides,
    };
    const registry = new Registry();
    svc = DiscoveryService.start({ flags, discovery: null, maxStreams: 128, streams: null, registry, lifecycleTickMs: 20, etcdMinRetryMs: 50, etcdMaxRetryMs: 300 });
    changes = [];
    svc.onChange((c) => changes.push(c));
    http = await DirectoryHttpServer.start({ port: 0, host: '127.0.0.1', internalApiToken: '', heartbeats: svc, registry });
  }

  async function startEngine(opts: Partial<EngineControlOptions> = {}): Promise<EngineControl> {
    const engine = await EngineControl.start({
      etcdHosts: [etcd.address],
      etcdNamespace: NAMESPACE,
      httpPort: await freePort(),
      type: 'PREFILL',
      directoryUrl: `http://127.0.0.1:${http!.port}`,
      heartbeatIntervalMs: 100,
      leaseTtlS: 2,
      ...opts,
    });
    engines.push(engine);
    return engine;
  }

  const state = (name: string): string | null => svc!.instance(name)?.state ?? null;

  afterEach(async () => {
    for (const e of engines) await e.close();
    engines = [];
    await http?.close();
    http = null;
    await svc?.close();
    svc = null;
    raw?.close();
    raw = null;
    // Each test starts from an empty namespace.
    const c = new Etcd3({ hosts: etcd.clientUrl });
    await c.delete().prefix(`/${NAMESPACE}/`).exec();
    c.close();
  });

  it('registration: a leased PUT gives an ACTIVE instance that becomes a routing candidate with its first heartbeat', async () => {
    await startDirectory();
    const engine = await startEngine({ dpSize: 2 });
    await waitFor(() => svc!.instance(engine.name)?.routingCandidate, 15000, 'routing candidate');
    const v = svc!.instance(engine.name)!;
    expect(v.state).to.equal('ACTIVE');
    expect(v.registration).to.deep.include({ type: 'PREFILL', dpSize: 2, incarnationId: engine.incarnationId });
    await waitFor(() => engine.lastHeartbeatStatus === 200, 15000, 'heartbeat answer');
    expect(svc!.etcdConnected).to.equal(true);
  });

  it('instances registered before the directory starts are found by the initial listing', async () => {
    // Engines need a directory URL only for heartbeats; register first with none.
    const engine = await EngineControl.start({ etcdHosts: [etcd.address], etcdNamespace: NAMESPACE, httpPort: await freePort(), type: 'DEFAULT', directoryUrl: null, leaseTtlS: 2 });
    engines.push(engine);
    await startDirectory();
    await waitFor(() => state(engine.name) === 'ACTIVE', 15000, 'listed instance');
  });

  it('lease lost with a healthy engine: LEASE_LOST, still schedulable, kept alive by heartbeats', async () => {
    // A generous timeout: heartbeats every 100 ms must keep it LEASE_LOST even on a loaded machine.
    await startDirectory({ leaseLostHeartbeatTimeoutMs: 5000 });
    const engine = await startEngine();
    await waitFor(() => svc!.instance(engine.name)?.routingCandidate, 15000, 'registered');
    await engine.loseLease();
    await waitFor(() => state(engine.name) === 'LEASE_LOST', 15000, 'LEASE_LOST');
    expect(svc!.instance(engine.name)!.schedulable).to.equal(true);
    // Heartbeats go on every 100 ms, far inside the timeout: it stays LEASE_LOST. Wait for
    // several accepted heartbeats rather than for a time.
    const sent = engine.heartbeatCount;
    await waitFor(() => engine.heartbeatCount >= sent + 15, 15000, 'more heartbeats');
    expect(state(engine.name)).to.equal('LEASE_LOST');
    // Only a PUT with the same incarnation makes it ACTIVE again, with the same generation.
    const generation = svc!.instance(engine.name)!.generation;
    await engine.reregister();
    await waitFor(() => state(engine.name) === 'ACTIVE', 15000, 'ACTIVE again');
    expect(svc!.instance(engine.name)!.generation).to.equal(generation);
  });

  it('a lease etcd ends on its own (expired while the engine was stopped, or revoked from outside): the engine writes its key again under the same incarnation, ACTIVE with its index kept', async () => {
    await startDirectory({ leaseLostHeartbeatTimeoutMs: 5000 });
    const engine = await startEngine();
    await waitFor(() => svc!.instance(engine.name)?.routingCandidate, 15000, 'registered');
    const generation = svc!.instance(engine.name)!.generation;
    raw = new Etcd3({ hosts: etcd.clientUrl });
    const { leases } = await raw.leaseClient.leaseLeases();
    expect(leases).to.have.length(1);
    await raw.leaseClient.leaseRevoke({ ID: leases[0]!.ID });
    expect(await raw.get(engine.key).string()).to.equal(null);
    // The engine learns it at its next keep-alive and registers again: a new lease, same incarnation.
    await waitFor(async () => (await raw!.get(engine.key).string()) !== null, 15000, 'key written again');
    const value = JSON.parse((await raw.get(engine.key).string())!) as { incarnation_id: string };
    expect(value.incarnation_id).to.equal(engine.incarnationId);
    const after = await raw.leaseClient.leaseLeases();
    expect(after.leases.map((l) => String(l.ID))).to.not.include(String(leases[0]!.ID));
    await waitFor(() => state(engine.name) === 'ACTIVE', 15000, 'ACTIVE again');
    expect(svc!.instance(engine.name)!.generation).to.equal(generation);
  });

  it('lease expiry with a dead engine: SUSPECT (not schedulable), then removed after the detect interval', async () => {
    await startDirectory();
    const engine = await startEngine();
    await waitFor(() => svc!.instance(engine.name)?.routingCandidate, 15000, 'registered');
    await engine.kill(); // no revoke: etcd expires the lease after its TTL
    await waitFor(() => state(engine.name) === 'SUSPECT', 10000, 'SUSPECT');
    expect(svc!.instance(engine.name)!.schedulable).to.equal(false);
    await waitFor(() => state(engine.name) === null, 15000, 'removed');
    const moves = changes
      .filter((c) => c.instance.name === engine.name && (c.kind === 'state' || c.kind === 'remove'))
      .map((c) => (c.kind === 'state' ? `${c.from}->${c.to}` : c.kind));
    expect(moves).to.deep.equal(['ACTIVE->SUSPECT', 'remove']);
    expect(engine.lastHeartbeatStatus).to.equal(200); // its last heartbeat before the crash
  });

  it('LEASE_LOST without heartbeats for the timeout becomes SUSPECT; a heartbeat then gives LEASE_LOST, never ACTIVE', async () => {
    await startDirectory({ leaseLostHeartbeatTimeoutMs: 300, detectDisconnectedInstanceIntervalS: 30 });
    const engine = await startEngine({ heartbeatIntervalMs: 60000 }); // one heartbeat at start, then silence
    // That first heartbeat can reach the directory before its etcd watch has seen the key (and is
    // refused); until the instance is a candidate, heartbeat again at most every 500 ms.
    let nextHeartbeatAt = performance.now() + 500;
    await waitFor(async () => {
      if (svc!.instance(engine.name)?.routingCandidate) return true;
      if (performance.now() >= nextHeartbeatAt) {
        nextHeartbeatAt = performance.now() + 500;
        await engine.heartbeatNow();
      }
      return false;
    }, 15000, 'registered');
    await engine.loseLease();
    await waitFor(() => state(engine.name) === 'SUSPECT', 15000, 'SUSPECT after heartbeat timeout');
    const reasons = changes.filter((c) => c.kind === 'state').map((c) => (c.kind === 'state' ? `${c.from}->${c.to}:${c.reason}` : ''));
    expect(reasons).to.include.ordered.members(['ACTIVE->LEASE_LOST:probe_healthy', 'LEASE_LOST->SUSPECT:heartbeat_timeout']);
    expect(await engine.heartbeatNow()).to.equal(200);
    // Read the moves rather than the current state: the 300 ms timeout may already have moved it
    // back to SUSPECT on a slow machine.
    const after = changes.filter((c) => c.kind === 'state').map((c) => (c.kind === 'state' ? `${c.from}->${c.to}:${c.reason}` : ''));
    expect(after).to.include('SUSPECT->LEASE_LOST:heartbeat_while_suspect');
    expect(after.filter((m) => m.endsWith('->ACTIVE:registration_refreshed'))).to.deep.equal([]);
  });

  it('same-incarnation refresh keeps the instance (generation unchanged, no replacement)', async () => {
    await startDirectory();
    const engine = await startEngine();
    await waitFor(() => state(engine.name) === 'ACTIVE', 15000, 'registered');
    const first = svc!.instance(engine.name)!;
    // register_ts_ms is in ms: make sure the refresh carries a later one, so it is observable.
    await waitFor(() => Date.now() > first.registration.registerTsMs!, 1000, 'next ms');
    await engine.reregister();
    await waitFor(() => svc!.instance(engine.name)!.registration.registerTsMs! > first.registration.registerTsMs!, 15000, 'refresh seen');
    const generation = first.generation;
    expect(svc!.instance(engine.name)!.state).to.equal('ACTIVE');
    expect(svc!.instance(engine.name)!.generation).to.equal(generation);
    expect(changes.filter((c) => c.kind === 'replace')).to.have.length(0);
  });

  it('new incarnation on the same address is a replacement: new generation, the old heartbeat identity refused', async () => {
    await startDirectory();
    const engine = await startEngine();
    await waitFor(() => svc!.instance(engine.name)?.routingCandidate, 15000, 'registered');
    const oldInc = engine.incarnationId;
    const generation = svc!.instance(engine.name)!.generation;
    await engine.restart();
    await waitFor(() => svc!.instance(engine.name)?.registration.incarnationId === engine.incarnationId, 15000, 'replacement seen');
    expect(svc!.instance(engine.name)!.generation).to.not.equal(generation);
    expect(changes.some((c) => c.kind === 'replace' && c.previous.registration.incarnationId === oldInc)).to.equal(true);
    // A heartbeat still carrying the old incarnation is stale: 409.
    const res = await fetch(`http://127.0.0.1:${http!.port}/v1/internal/heartbeat`, {
      method: 'POST',
      body: JSON.stringify({ name: engine.name, incarnation_id: oldInc, load_metrics: { waiting_requests_num: 0, gpu_cache_usage_perc: 0 } }),
    });
    expect(res.status).to.equal(409);
  });

  it('a bad key or value is logged and counted, never fatal for the watch', async () => {
    await startDirectory();
    raw = new Etcd3({ hosts: etcd.clientUrl });
    await raw.put(`/${NAMESPACE}/XLLM:PREFILL:127.0.0.1:1`).value('not json');
    await raw.put(`/${NAMESPACE}/XLLM:BOGUS:127.0.0.1:2`).value('{}');
    const engine = await startEngine();
    await waitFor(() => state(engine.name) === 'ACTIVE', 15000, 'good instance after bad keys');
    const metrics = await (await fetch(`http://127.0.0.1:${http!.port}/metrics`)).text();
    expect(metrics).to.match(/discovery_rejected_keys_total\{class="invalid_instance"\} 1/);
    expect(metrics).to.match(/discovery_rejected_keys_total\{class="bad_key"\} 1/);
  });

  it('LOADMETRICS gives load to an instance that has not heartbeated yet', async () => {
    await startDirectory();
    const engine = await EngineControl.start({ etcdHosts: [etcd.address], etcdNamespace: NAMESPACE, httpPort: await freePort(), type: 'PREFILL', directoryUrl: null, leaseTtlS: 2 });
    engines.push(engine);
    await waitFor(() => state(engine.name) === 'ACTIVE', 15000, 'registered');
    raw = new Etcd3({ hosts: etcd.clientUrl });
    await raw.put(`/${NAMESPACE}/XLLM:LOADMETRICS:${engine.name}`).value(JSON.stringify({ waiting_requests_num: 7, gpu_cache_usage_perc: 0.25 }));
    await waitFor(() => svc!.instance(engine.name)?.load?.waitingRequests === 7, 15000, 'legacy load');
  });

  it('etcd unreachable at start stops nothing: heartbeats answer 409, and instances appear once etcd answers', async () => {
    await etcd.stop();
    await startDirectory();
    expect(svc!.diagnostics().stale).to.equal(true);
    const res = await fetch(`http://127.0.0.1:${http!.port}/v1/internal/heartbeat`, { method: 'POST', body: JSON.stringify({ name: '127.0.0.1:1' }) });
    expect(res.status).to.equal(409);
    await etcd.restart();
    const engine = await startEngine();
    await waitFor(() => state(engine.name) === 'ACTIVE', 20000, 'instance after etcd came up');
    expect(svc!.diagnostics().stale).to.equal(false);
  });

  it('etcd stopped: the table is kept (stale); restarted: re-listed, and a change made meanwhile is seen', async () => {
    await startDirectory();
    const a = await startEngine({ leaseTtlS: 30 });
    await waitFor(() => svc!.instance(a.name)?.routingCandidate, 15000, 'registered');
    const listings = svc!.diagnostics().etcdListings;
    await etcd.stop();
    await waitFor(() => svc!.diagnostics().stale, 10000, 'stale');
    expect(state(a.name)).to.equal('ACTIVE');
    // Heartbeats (HTTP, not etcd) still refresh load while etcd is away.
    expect(await a.heartbeatNow()).to.equal(200);
    await etcd.restart();
    // An instance registered after the restart must be found by the re-list or the new watch.
    const b = await startEngine({ leaseTtlS: 30 });
    await waitFor(() => svc!.etcdConnected && state(b.name) === 'ACTIVE', 20000, 're-listed');
    expect(svc!.diagnostics().etcdListings).to.be.greaterThan(listings);
    expect(state(a.name)).to.equal('ACTIVE');
  });
});
