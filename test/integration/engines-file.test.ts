// engines.md §4 end to end over real processes: vLLM-kind simulated engines (no etcd; /health and
// /metrics over real HTTP, KV events over real ZeroMQ), a directory-svc reading the engines file,
// and a router forwarding to the engines' urls.
//
//   SimProcess ×N ◀── GET /health, /metrics ── directory-svc --engines_file ──gRPC──▶ test / router
//             ◀── SUB / DEALER (ZeroMQ) ──┘                                   router ──HTTP──▶ url
import { expect } from 'chai';
import { EngineScraper } from '../../directory-svc/engines/engine-scraper.js';
import { parseEnginesFile } from '../../directory-svc/engines/engines-file.js';
import { FleetDirectory, SimProcess } from '../helpers/engines-fleet.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { stopAllProcesses } from '../../shared/process/service-process.js';
import { RouterProcess } from '../helpers/router-stack.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import type { WireViewInstance } from '../../shared/view/view-wire.js';

const TOKENS = [1, 2, 3, 4, 5, 6, 7, 8];

describe('engines.md §4 the engines file (real processes)', function () {
  this.timeout(120000);
  let dir: FleetDirectory | null = null;

  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
    await dir?.close();
    dir = null;
    await stopAllProcesses();
  });

  async function hits(name: string): Promise<number> {
    const m = await dir!.matches(TOKENS, name);
    return m.length > 0 && m.every((x) => x.synchronized) ? Math.min(...m.map((x) => x.device_hit_tokens)) : -1;
  }

  /**
   * Credits TOKENS on `a` and pushes seq 0 out of a four-batch history ring. Warm-up batches go out
   * (300 ms apart, well inside the ring) until one reaches the subscriber, since a PUB drops what it
   * sends before the SUB has joined; afterwards only a resume from last + 1 can bring credit back.
   */
  async function creditPastRing(a: SimProcess): Promise<void> {
    let warm = 1000;
    let nextWarmAt = 0;
    await waitFor(async () => {
      if (performance.now() >= nextWarmAt) {
        nextWarmAt = performance.now() + 300;
        await a.complete(Array.from({ length: 8 }, () => warm++));
      }
      const m = await dir!.matches(TOKENS, a.name);
      return m.length > 0 && m.every((x) => x.synchronized && BigInt(x.sequence) >= 0n);
    }, 20000, 'a batch reached the subscriber');
    await a.complete(TOKENS);
    for (let i = 0; i < 4; i++) await a.complete(Array.from({ length: 8 }, () => warm++));
    await waitFor(async () => (await hits(a.name)) === 8, 20000, 'credited');
  }

  it('E11 entries added, changed and removed on reload update instances and streams; an invalid reload keeps the last good list', async () => {
    // The entry's topic must decide: an engine serving /kv_event_sources would override it (engines.md §6).
    const a = await SimProcess.start('vllm-a', { args: ['--no_kv_event_sources'] });
    const b = await SimProcess.start('vllm-b');
    dir = await FleetDirectory.start([a.entry()]);

    // A listed engine becomes ACTIVE with a load, gets its stream, and credits what it caches.
    await waitFor(async () => (await dir!.instance('vllm-a'))?.state === 'ACTIVE' && (await dir!.instance('vllm-a'))?.load != null, 20000, 'vllm-a ACTIVE with load');
    const inst = (await dir.instance('vllm-a'))!;
    expect(inst).to.deep.include({ type: 'DEFAULT', backend_type: 'vllm', url: a.url, schedulable: true });
    await waitFor(async () => (await hits('vllm-a')) === 0, 20000, 'vllm-a synchronized');
    expect((await a.complete(TOKENS)).status).to.equal(200);
    await waitFor(async () => (await hits('vllm-a')) === 8, 20000, 'vllm-a credited');

    // Added.
    dir.writeEngines([a.entry(), b.entry()]);
    await waitFor(async () => (await dir!.instance('vllm-b'))?.state === 'ACTIVE', 20000, 'vllm-b added');
    await waitFor(async () => (await dir!.streams('vllm-b')).length === 1, 20000, 'vllm-b stream');

    // Changed: another topic for vllm-a gives it a fresh stream (same instance, same generation).
    const generation = (await dir.instance('vllm-a'))!.generation;
    dir.writeEngines([a.entry({ topic: 'kv' }), b.entry()]);
    await waitFor(async () => (await dir!.streams('vllm-a'))[0]?.topic === 'kv', 20000, 'vllm-a stream re-planned');
    expect((await dir.instance('vllm-a'))!.generation).to.equal(generation);

    // Invalid: logged once per distinct content, counted, and the last good list stays.
    const bad = JSON.stringify({ engines: [a.entry({ topic: 'kv' }), b.entry({ dp_size: 0 })] });
    dir.writeRaw(bad);
    await dir.proc.waitForLog((l) => String(l['msg']).startsWith('engines file rejected on reload') && String(l['err']).includes('engines[1].dp_size'), 20000, 'reload error');
    dir.writeRaw(`${bad} `);
    await dir.proc.waitForLog((l) => String(l['msg']).startsWith('engines file rejected on reload') && dir!.proc.logLines.filter((x) => String(x['msg']).startsWith('engines file rejected')).length === 2, 20000, 'second distinct error');
    expect(await dir.metricsText()).to.match(/^kv_engines_file_errors_total 2$/m);
    expect((await dir.instances()).map((i) => i.name)).to.deep.equal(['vllm-a', 'vllm-b']);

    // Removed.
    dir.writeEngines([a.entry({ topic: 'kv' })]);
    await waitFor(async () => (await dir!.instance('vllm-b')) === undefined, 20000, 'vllm-b removed');
    await waitFor(async () => (await dir!.streams('vllm-b')).length === 0, 20000, 'vllm-b stream removed');
    expect(await dir.metricsText()).to.match(/^kv_engines_file_errors_total 2$/m);
  });

  it('E12 load from /metrics, stale load excluded, SUSPECT after failed probes, and a restart detected by process_start_time_seconds (E7: changed identity → discarded, no stale credit)', async () => {
    // token_interval_ms holds a streaming request open, so the engine reports it as waiting.
    const a = await SimProcess.start('vllm-a', { args: ['--token_interval_ms=100'] });
    dir = await FleetDirectory.start([a.entry()]);
    await waitFor(async () => (await hits('vllm-a')) === 0, 30000, 'vllm-a synchronized');
    const before = (await dir.instance('vllm-a'))!;
    expect(before.incarnation_id).to.match(/^\d\.\d+e\+09$/);

    const held = a.complete(TOKENS, { stream: true, max_tokens: 60 });
    await waitFor(async () => String((await dir!.instance('vllm-a'))?.load?.waiting_requests_num) === '1', 20000, 'waiting 1 from /metrics');
    await (await held).text();
    await waitFor(async () => (await hits('vllm-a')) === 8, 20000, 'credited');

    // kill -9: scrapes fail, the load goes stale (3 × 100 ms) and the probes fail → no candidate, SUSPECT.
    await a.proc.kill();
    await waitFor(async () => {
      const i = await dir!.instance('vllm-a');
      return i?.load == null && i?.state === 'SUSPECT';
    }, 20000, 'stale load and SUSPECT');
    expect(await dir.streams('vllm-a')).to.have.length(1); // engines.md §4.1: streams kept

    // Restarted on the same address: a new process start time is a new incarnation, a new
    // generation, and none of the old process's blocks are credited.
    await a.restart();
    await waitFor(async () => {
      const i = await dir!.instance('vllm-a');
      return i?.state === 'ACTIVE' && i.load != null && i.incarnation_id !== before.incarnation_id;
    }, 30000, 'new incarnation ACTIVE');
    const after = (await dir.instance('vllm-a'))!;
    expect(after.generation).to.not.equal(before.generation);
    // The old generation's subscriber reconnects too, sees the new identity and may rebuild from
    // the new process (0 hits) before the reconciler's next pass replaces it with the new
    // generation's, which starts unsynchronized. Only the new one has never lost its connection.
    await waitFor(async () => {
      const s = await dir!.streams('vllm-a');
      return s.length === 1 && Object.keys(s[0]!.counters?.sync_lost ?? {}).length === 0 && (await hits('vllm-a')) === 0;
    }, 30000, 'the new generation synchronized');
    expect(await hits('vllm-a')).to.equal(0);
  });

  /**
   * vllm-a behind a TCP proxy on its events socket (/metrics stays reachable), credited past a
   * four-batch history ring, then cut until its index is hidden and restored. Once seq 0 has
   * rotated out, a discarded stream can only come back as history_lost, so what follows the
   * restore tells a resume from last + 1 from a rebuild.
   */
  async function cutAndRestore(args: readonly string[]): Promise<{ before: WireViewInstance }> {
    // The entry's endpoint is the proxy: an engine serving /kv_event_sources would bypass it (engines.md §6).
    const a = await SimProcess.start('vllm-a', { args: ['--replay_buffer_steps=4', '--no_kv_event_sources', ...args] });
    const proxy = new TcpProxy(await freePort(), a.port + 1);
    await proxy.up();
    cleanups.push(() => proxy.down());
    dir = await FleetDirectory.start([a.entry({ event_endpoint: `tcp://${proxy.address}` })]);
    await waitFor(async () => (await hits('vllm-a')) === 0, 30000, 'synchronized');
    await creditPastRing(a);
    const before = (await dir.instance('vllm-a'))!;
    await proxy.down();
    await waitFor(async () => (await hits('vllm-a')) === -1, 20000, 'index hidden on disconnect');
    await proxy.up();
    return { before };
  }

  it('E7 disconnect + reconnect with the same identity: zero hits while cut, then resumed from last + 1 (not rebuilt) with the same generation', async () => {
    const { before } = await cutAndRestore([]);
    await waitFor(async () => (await hits('vllm-a')) === 8, 30000, 'credited again after reconnect');
    const after = (await dir!.instance('vllm-a'))!;
    expect([after.generation, after.incarnation_id]).to.deep.equal([before.generation, before.incarnation_id]);
  });

  it('E7 disconnect + reconnect without an identity source (no process_start_time_seconds): the index is discarded, never resumed', async () => {
    await cutAndRestore(['--no_process_metrics']);
    await waitFor(async () => {
      const m = await dir!.matches(TOKENS, 'vllm-a');
      return m.length > 0 && m.every((x) => x.error.startsWith('history_lost'));
    }, 30000, 'history_lost after the discard');
    expect(await hits('vllm-a')).to.equal(-1);
  });

  it('E12 an engine without process_start_time_seconds is admitted with an empty incarnation (no identity source)', async () => {
    const a = await SimProcess.start('vllm-a', { args: ['--no_process_metrics'] });
    expect(await a.metricsText()).to.not.contain('process_start_time_seconds');
    dir = await FleetDirectory.start([a.entry()]);
    await waitFor(async () => (await dir!.instance('vllm-a'))?.load != null, 20000, 'admitted');
    expect((await dir.instance('vllm-a'))!.incarnation_id).to.equal('');
  });

  it('E12 an SGLang-kind engine: load from sglang:num_queue_reqs, identity from process_start_time_seconds', async () => {
    const a = await SimProcess.start('sglang-a', { kind: 'sglang', args: ['--token_interval_ms=100'] });
    dir = await FleetDirectory.start([a.entry()]);
    await waitFor(async () => (await hits('sglang-a')) === 0, 30000, 'synchronized');
    expect((await dir.instance('sglang-a'))!).to.deep.include({ backend_type: 'sglang', state: 'ACTIVE' });
    expect((await dir.instance('sglang-a'))!.incarnation_id).to.match(/e\+09$/);
    const held = a.complete(TOKENS, { stream: true, max_tokens: 60 });
    await waitFor(async () => String((await dir!.instance('sglang-a'))?.load?.waiting_requests_num) === '1', 20000, 'waiting 1 from sglang:num_queue_reqs');
    await (await held).text();
  });

  it('E7 the identity source: a fresh scrape per call, unchanged while the process lives, changed after a restart, rejected while /metrics is down', async () => {
    const a = await SimProcess.start('vllm-a');
    const entry = parseEnginesFile(JSON.stringify({ engines: [a.entry()] })).engines[0]!;
    const sink = { putEngine: () => null, engineLoad: () => undefined, engineHealth: () => undefined, engineModels: () => undefined };
    const scraper = new EngineScraper(entry, sink, { refreshIntervalMs: 60000, failedProbesToSuspect: 2, requestTimeoutMs: 1000, nowMs: Date.now, report: () => undefined });
    try {
      expect(scraper.current()).to.equal(undefined);
      const first = await scraper.scrapeNow(AbortSignal.timeout(5000));
      expect(first).to.match(/e\+09$/);
      expect(scraper.current()).to.equal(first);
      expect(await scraper.scrapeNow(AbortSignal.timeout(5000))).to.equal(first);

      await a.proc.kill();
      let failed = false;
      await scraper.scrapeNow(AbortSignal.timeout(5000)).catch(() => (failed = true));
      expect(failed).to.equal(true);
      expect(scraper.current()).to.equal(first); // the latest successful scrape

      await a.restart();
      const second = await scraper.scrapeNow(AbortSignal.timeout(5000));
      expect(second).to.not.equal(first);
      expect(scraper.current()).to.equal(second);
    } finally {
      await scraper.close();
    }
  });

  it('the router forwards OpenAI requests to the engine url and routes by its /metrics load', async () => {
    const a = await SimProcess.start('vllm-a');
    dir = await FleetDirectory.start([a.entry()]);
    await waitFor(async () => (await hits('vllm-a')) === 0, 30000, 'synchronized');
    const router = await RouterProcess.start(`127.0.0.1:${dir.grpcPort}`, ['--load_balance_policy=CAR', '--log_level=warn'], { name: 'router' });
    const send = (): Promise<Response> =>
      fetch(`${router.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: TOKENS, max_tokens: 1 }) });
    const res = await waitFor(async () => {
      const r = await send();
      return r.status === 200 ? r : null;
    }, 20000, 'routed 200');
    expect(res.headers.get('x-kv-router-instance')).to.equal('vllm-a');
    await res.text();
    await waitFor(async () => (await hits('vllm-a')) === 8, 20000, 'the forwarded prompt is resident');
    const second = (await (await send()).json()) as { usage: { prompt_tokens_details?: { cached_tokens: number } } };
    expect(second.usage.prompt_tokens_details?.cached_tokens).to.equal(8);
  });
});
