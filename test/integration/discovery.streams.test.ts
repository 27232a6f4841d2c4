// discovery.md "From instances to streams" end to end: engines register in a real etcd
// (EngineControl) and publish KV events over real ZeroMQ (EngineSimulator); DiscoveryService
// plans and reconciles streams into a real Directory of StreamSubscribers.
//
//   EngineControl ──lease PUT──▶ etcd ──watch──▶ DiscoveryService ──addStream/removeStream──▶ Directory
//   EngineSimulator rank r ──PUB (port+1+r) / ROUTER (port+3+r)──▶ StreamSubscriber ──▶ query hits
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { DEFAULT_STREAM_LIMITS, type DiscoveryConfig } from '../../shared/config/kv-events-config.js';
import { Directory, type DirectoryStreamFactory } from '../../directory-svc/directory.js';
import { DiscoveryService } from '../../directory-svc/discovery/discovery-service.js';
import { DirectoryHttpServer } from '../../directory-svc/http/directory-http-server.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import { EngineControl, type EngineControlOptions } from '../../tools/engine-sim/engine-control.js';
import { EngineSimulator } from '../../tools/engine-sim/engine-simulator.js';
import { EtcdServer } from '../helpers/etcd-server.js';
import { freePortRange, waitFor } from '../helpers/ports.js';

// Small offsets so one free range of 5 ports holds HTTP (p), events (p+1, p+2), replay (p+3, p+4).
const discovery: DiscoveryConfig = { enabled: true, blockSize: 4, topic: '', eventPortOffset: 1, replayPortOffset: 3, refreshIntervalMs: 50 };
const TOKENS = [1, 2, 3, 4, 5, 6, 7, 8];
const subscriberFactory: DirectoryStreamFactory = (cfg, limits) => StreamSubscriber.create(cfg, limits);

describe('discovery.md From instances to streams (real etcd, ZeroMQ, subscribers)', function () {
  this.timeout(30000);
  let etcd: EtcdServer;
  let directory: Directory | null = null;
  let svc: DiscoveryService | null = null;
  let http: DirectoryHttpServer | null = null;
  let controls: EngineControl[] = [];
  let sims: EngineSimulator[] = [];

  before(async () => {
    etcd = await EtcdServer.start();
  });
  after(async () => {
    await etcd.destroy();
  });

  beforeEach(async () => {
    directory = new Directory({
      enabled: true,
      streamSource: 'discovery',
      maxStreams: 128,
      limits: { ...DEFAULT_STREAM_LIMITS, replayTimeoutMs: 500, resyncIntervalMs: 0 },
      createStream: subscriberFactory,
    });
    const registry = new Registry();
    svc = DiscoveryService.start({
      flags: {
        etcdAddr: [{ host: '127.0.0.1', port: etcd.clientPort }],
        etcdNamespace: 'streams-test',
        leaseLostHeartbeatTimeoutMs: 3000,
        detectDisconnectedInstanceIntervalS: 30,
        instanceDeleteProbeTimeoutMs: 200,
        instanceDeleteProbeAttempts: 1,
      },
      discovery,
      maxStreams: 128,
      streams: directory,
      registry,
      lifecycleTickMs: 20,
    });
    http = await DirectoryHttpServer.start({ port: 0, host: '127.0.0.1', internalApiToken: '', heartbeats: svc, registry });
  });

  afterEach(async () => {
    for (const c of controls) await c.close();
    controls = [];
    await svc?.close();
    svc = null;
    await http?.close();
    http = null;
    await directory?.close();
    directory = null;
    for (const s of sims) await s.close();
    sims = [];
  });

  /** An engine: the KV publisher ranks and the control side on one free port range. */
  async function startEngine(opts: Partial<EngineControlOptions> & { dpSize?: number } = {}): Promise<{ sim: EngineSimulator; control: EngineControl; name: string }> {
    const p = await freePortRange(5);
    const name = `127.0.0.1:${p}`;
    const sim = await EngineSimulator.start({
      instanceName: name,
      dpSize: opts.dpSize ?? 1,
      blockSize: 4,
      eventPortBase: p + discovery.eventPortOffset,
      replayPortBase: p + discovery.replayPortOffset,
      deviceCapacityBlocks: 64,
    });
    sims.push(sim);
    const control = await EngineControl.start({
      etcdHosts: [etcd.address],
      etcdNamespace: 'streams-test',
      httpPort: p,
      type: 'PREFILL',
      directoryUrl: `http://127.0.0.1:${http!.port}`,
      heartbeatIntervalMs: 100,
      leaseTtlS: 10,
      ...opts,
    });
    controls.push(control);
    return { sim, control, name };
  }

  function matchesOf(name: string): { dpRank: number; synchronized: boolean; deviceHitTokens: number }[] {
    return directory!
      .query(TOKENS)
      .matches.filter((m) => m.instance_name === name)
      .map((m) => ({ dpRank: m.dp_rank, synchronized: m.synchronized, deviceHitTokens: m.device_hit_tokens }));
  }

  const streamsOf = (name: string): string[] => directory!.listStreams().filter((s) => s.instanceName === name).map((s) => `${s.dpRank} ${s.endpoint} ${s.replayEndpoint}`);

  it('DP=2: rank r is subscribed at port+offset+r, and hits are per rank once synchronized', async () => {
    const { sim, name } = await startEngine({ dpSize: 2 });
    const p = Number(name.split(':')[1]);
    await waitFor(() => streamsOf(name).length === 2, 10000, 'two streams');
    expect(streamsOf(name)).to.deep.equal([
      `0 tcp://127.0.0.1:${p + 1} tcp://127.0.0.1:${p + 3}`,
      `1 tcp://127.0.0.1:${p + 2} tcp://127.0.0.1:${p + 4}`,
    ]);
    await waitFor(() => matchesOf(name).every((m) => m.synchronized), 15000, 'synchronized');
    await sim.rank(0).admitPrompt(TOKENS);
    await waitFor(() => matchesOf(name)[0]!.deviceHitTokens === 8, 10000, 'rank 0 hit');
    expect(matchesOf(name)[1]!.deviceHitTokens).to.equal(0);
  });

  it('a new incarnation on the same address gets zero hits until its own snapshot has been applied', async () => {
    const { sim, control, name } = await startEngine();
    await waitFor(() => matchesOf(name)[0]?.synchronized, 15000, 'synchronized');
    await sim.rank(0).admitPrompt(TOKENS);
    await waitFor(() => matchesOf(name)[0]!.deviceHitTokens === 8, 10000, 'hit before restart');
    const oldGeneration = svc!.instance(name)!.generation;

    // Hold every snapshot answer, then restart the engine process (cache survives, so once
    // recovered the same prompt hits again).
    const publisher = sim.rank(0).publisher;
    publisher.snapshotFaults.dropRequests = true;
    await sim.restart({ keepState: true });
    await control.restart();
    await waitFor(() => svc!.diagnostics().streams.some((s) => s.instanceName === name && s.generation !== oldGeneration), 10000, 'replacement subscribed');
    const requestsBefore = publisher.snapshotRequests.length;
    await waitFor(() => publisher.snapshotRequests.length > requestsBefore, 10000, 'new subscriber asks for a snapshot');
    expect(matchesOf(name)).to.deep.equal([{ dpRank: 0, synchronized: false, deviceHitTokens: 0 }]);

    publisher.snapshotFaults.dropRequests = false;
    await waitFor(() => matchesOf(name)[0]!.deviceHitTokens === 8, 15000, 'hit after the new snapshot');
  });

  it('DECODE is never subscribed; MIX follows its role: DECODE drops the streams, PREFILL brings them back', async () => {
    const decode = await startEngine({ type: 'DECODE' });
    const mix = await startEngine({ type: 'MIX', currentRole: 'PREFILL' });
    await waitFor(() => streamsOf(mix.name).length === 1, 10000, 'MIX as PREFILL subscribed');
    expect(streamsOf(decode.name)).to.deep.equal([]);
    expect(svc!.instance(decode.name)!.state).to.equal('ACTIVE');

    mix.control.setRole('DECODE');
    await waitFor(() => streamsOf(mix.name).length === 0, 10000, 'MIX as DECODE unsubscribed');
    mix.control.setRole('PREFILL');
    await waitFor(() => streamsOf(mix.name).length === 1, 10000, 'MIX as PREFILL again');
  });

  it('a SUSPECT instance loses its streams; a LEASE_LOST one keeps them', async () => {
    const kept = await startEngine();
    const dropped = await startEngine();
    await waitFor(() => streamsOf(kept.name).length === 1 && streamsOf(dropped.name).length === 1, 10000, 'both subscribed');
    await kept.control.loseLease();
    // A hung engine: /health fails and no heartbeat comes (discovery.md: a heartbeat would move a
    // SUSPECT instance back to LEASE_LOST, which kept its streams, and raced the unsubscribe).
    dropped.control.pauseHeartbeats();
    dropped.control.setHealthy(false);
    await dropped.control.loseLease();
    await waitFor(() => svc!.instance(dropped.name)?.state === 'SUSPECT', 10000, 'SUSPECT');
    await waitFor(() => streamsOf(dropped.name).length === 0, 10000, 'SUSPECT unsubscribed');
    expect(svc!.instance(kept.name)!.state).to.equal('LEASE_LOST');
    // Reconciles run every 50 ms: a few more passes must not touch the LEASE_LOST streams.
    await svc!.reconcileNow();
    await svc!.reconcileNow();
    expect(streamsOf(kept.name)).to.have.length(1);
  });
});
