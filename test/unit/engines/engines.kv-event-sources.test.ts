// engines.md §6: an engine's `GET /kv_event_sources` answer (vLLM's bare array, one object per DP
// rank, wildcard hosts replaced by the engine's address), how it wins over the entry's ports in the
// stream plan, and when the scraper asks for it (before admission, before a replacement, after
// SUSPECT), against a real HTTP server on loopback.
//
//   test HTTP server (/health, /metrics, /kv_event_sources) ◀── GET ── EngineScraper ──put──▶ recording sink
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InstanceTable } from '../../../directory-svc/discovery/instance-table.js';
import { planStreams } from '../../../directory-svc/discovery/stream-planner.js';
import { EngineScraper, type EngineReport } from '../../../directory-svc/engines/engine-scraper.js';
import { parseEnginesFile, sameEngineEntry, type EngineEntry } from '../../../directory-svc/engines/engines-file.js';
import { KvEventSourcesError, parseKvEventSources } from '../../../directory-svc/engines/kv-event-sources.js';
import { waitFor } from '../../helpers/ports.js';

/** vLLM's answer with `"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5567"` and two DP ranks. */
const TWO_RANKS = [
  { data_parallel_rank: 1, endpoint: 'tcp://*:5558', replay_endpoint: 'tcp://*:5568', topic: 'kv' },
  { data_parallel_rank: 0, endpoint: 'tcp://*:5557', replay_endpoint: 'tcp://*:5567', topic: 'kv' },
];

function errorOf(body: unknown): string {
  try {
    parseKvEventSources(body, '10.0.0.5');
  } catch (e) {
    if (e instanceof KvEventSourcesError) return e.message;
    throw e;
  }
  throw new Error('expected a KvEventSourcesError');
}

function entry(over: Record<string, unknown> = {}): EngineEntry {
  const base = { name: 'vllm-0', url: 'http://10.0.0.5:8000', kind: 'vllm', dp_size: 1, event_endpoint: 'tcp://10.0.0.5:7000', block_size: 16 };
  return parseEnginesFile(JSON.stringify({ engines: [{ ...base, ...over }] })).engines[0]!;
}

describe('engines.md §6 GET /kv_event_sources', () => {
  describe('the answer', () => {
    it('E17 two DP ranks with wildcard hosts become connectable endpoints on the engine\'s address, sorted by rank', () => {
      expect(parseKvEventSources(TWO_RANKS, '10.0.0.5')).to.deep.equal([
        { dpRank: 0, endpoint: 'tcp://10.0.0.5:5557', replayEndpoint: 'tcp://10.0.0.5:5567', topic: 'kv' },
        { dpRank: 1, endpoint: 'tcp://10.0.0.5:5558', replayEndpoint: 'tcp://10.0.0.5:5568', topic: 'kv' },
      ]);
    });

    it('E17 0.0.0.0 and [::] are wildcards too (IPv6 engines keep their brackets); concrete hosts, null replay and extra keys pass', () => {
      const answer = [
        { data_parallel_rank: 0, endpoint: 'tcp://0.0.0.0:41001', replay_endpoint: null, topic: '', buffer_steps: 10000 },
        { data_parallel_rank: 1, endpoint: 'tcp://[::]:41002', replay_endpoint: 'tcp://10.0.0.1:41003', topic: '' },
      ];
      expect(parseKvEventSources(answer, '[fd00::5]')).to.deep.equal([
        { dpRank: 0, endpoint: 'tcp://[fd00::5]:41001', replayEndpoint: null, topic: '' },
        { dpRank: 1, endpoint: 'tcp://[fd00::5]:41002', replayEndpoint: 'tcp://10.0.0.1:41003', topic: '' },
      ]);
      expect(parseKvEventSources([], 'h'), 'an engine that publishes nothing').to.deep.equal([]);
    });

    const cases: [string, unknown, string][] = [
      ['an envelope object', { sources: TWO_RANKS }, 'expected a JSON array (one object per DP rank), got {"sources":'],
      ['an element that is not an object', [1], '[0]: expected an object, got 1'],
      ['a missing rank', [{ endpoint: 'tcp://*:1' }], '[0].data_parallel_rank: expected an integer in 0..1023, got nothing'],
      ['a negative rank', [{ data_parallel_rank: -1, endpoint: 'tcp://*:1' }], '[0].data_parallel_rank: expected an integer in 0..1023, got -1'],
      ['a rank twice', [TWO_RANKS[1], { ...TWO_RANKS[0], data_parallel_rank: 0 }], '[1].data_parallel_rank: rank 0 listed twice'],
      ['no endpoint', [{ data_parallel_rank: 0, endpoint: null }], '[0].endpoint: required'],
      ['an ipc endpoint', [{ data_parallel_rank: 0, endpoint: 'ipc:///tmp/kv' }], '[0].endpoint: expected tcp://host:port (a local ipc/inproc socket is not reachable from the directory)'],
      ['port 0', [{ data_parallel_rank: 0, endpoint: 'tcp://*:0' }], '[0].endpoint: expected tcp://host:port (port in 1..65535), got "tcp://*:0"'],
      ['a partial wildcard', [{ data_parallel_rank: 0, endpoint: 'tcp://*a:1' }], '[0].endpoint: expected tcp://host:port (a wildcard only as the whole host)'],
      ['a topic that is not a string', [{ data_parallel_rank: 0, endpoint: 'tcp://*:1', topic: 3 }], '[0].topic: expected a string, got 3'],
      ['one endpoint for two ranks', [{ data_parallel_rank: 0, endpoint: 'tcp://*:1' }, { data_parallel_rank: 1, endpoint: 'tcp://0.0.0.0:1' }], '[1].endpoint: tcp://10.0.0.5:1 is also [0].endpoint'],
    ];
    for (const [what, body, message] of cases) {
      it(`E17 refuses ${what}, naming the element and key`, () => {
        expect(errorOf(body)).to.contain(`kv_event_sources: ${message}`);
      });
    }
  });

  describe('streams in the plan', () => {
    const table = (): InstanceTable => new InstanceTable({ leaseLostHeartbeatTimeoutMs: 3000, detectDisconnectedIntervalMs: 15000 });

    it('E17 the answer wins over the entry\'s ports: its ranks, endpoints and topic; an engine without it uses the ports', () => {
      const t = table();
      const sources = parseKvEventSources(TWO_RANKS, '10.0.0.5');
      t.putEngine({ ...entry(), eventSources: sources, dpSize: 2 }, null, 0);
      t.putEngine(entry({ name: 'vllm-1', url: 'http://10.0.0.6:8000', event_endpoint: 'tcp://10.0.0.6:7000' }), null, 0);
      const plan = planStreams(t.instances(), null, 128);
      expect(plan.exclusions).to.deep.equal([]);
      expect(plan.streams.map((s) => [s.instanceName, s.dpRank, s.endpoint, s.replayEndpoint, s.topic])).to.deep.equal([
        ['vllm-0', 0, 'tcp://10.0.0.5:5557', 'tcp://10.0.0.5:5567', 'kv'],
        ['vllm-0', 1, 'tcp://10.0.0.5:5558', 'tcp://10.0.0.5:5568', 'kv'],
        ['vllm-1', 0, 'tcp://10.0.0.6:7000', '', ''],
      ]);
      expect(t.get('vllm-0')!.registration.dpSize).to.equal(2);
    });

    it('E17 an engine with no streams (no answer and no event_port, or an empty answer) is routable, excluded from subscriptions with the reason', () => {
      const t = table();
      t.putEngine({ ...entry(), eventEndpoint: null }, null, 0);
      t.putEngine({ ...entry({ name: 'vllm-1' }), eventSources: [] }, null, 0);
      const plan = planStreams(t.instances(), null, 128);
      expect(plan.streams).to.deep.equal([]);
      expect(plan.exclusions.map((e) => [e.class, e.instances, e.detail])).to.deep.equal([
        ['no_event_sources', ['vllm-0'], 'instance vllm-0 has no KV event streams: no GET /kv_event_sources answer and no event_port in its entry'],
        ['no_event_sources', ['vllm-1'], 'instance vllm-1 has no KV event streams: GET /kv_event_sources lists no publisher'],
      ]);
    });

    it('E17 an unchanged answer is the same entry; a moved rank is a changed one (the reconciler swaps that stream)', () => {
      const a = { ...entry(), eventSources: parseKvEventSources(TWO_RANKS, '10.0.0.5') };
      const b = { ...entry(), eventSources: parseKvEventSources(JSON.parse(JSON.stringify(TWO_RANKS)), '10.0.0.5') };
      expect(sameEngineEntry(a, b)).to.equal(true);
      const moved = { ...entry(), eventSources: parseKvEventSources([TWO_RANKS[1], { ...TWO_RANKS[0], endpoint: 'tcp://*:6000' }], '10.0.0.5') };
      expect(sameEngineEntry(a, moved)).to.equal(false);
      expect(sameEngineEntry(a, entry())).to.equal(false);
    });
  });

  describe('when the scraper asks (real HTTP)', () => {
    /** What the fake engine answers; tests change it in place. */
    interface EngineAnswers {
      health: number;
      startTime: string;
      sources: { status: number; body: string };
      sourcesAsked: number;
    }
    let server: Server | null = null;
    let scraper: EngineScraper | null = null;

    afterEach(async () => {
      await scraper?.close();
      scraper = null;
      await new Promise<void>((resolve) => (server === null ? resolve() : server.close(() => resolve())));
      server = null;
    });

    async function engine(answers: EngineAnswers): Promise<string> {
      server = createServer((req, res) => {
        if (req.url === '/health') return res.writeHead(answers.health).end();
        if (req.url === '/metrics') return res.writeHead(200).end(`vllm:num_requests_waiting 0\nprocess_start_time_seconds ${answers.startTime}\n`);
        if (req.url === '/kv_event_sources') {
          answers.sourcesAsked++;
          return res.writeHead(answers.sources.status, { 'content-type': 'application/json' }).end(answers.sources.body);
        }
        res.writeHead(404).end();
      });
      await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
    }

    /** The puts the scraper made, as (identity, event endpoints) pairs, and its reports. */
    function start(url: string, over: Record<string, unknown> = {}) {
      const puts: { identity: string | null; entry: EngineEntry }[] = [];
      const reports: [EngineReport, string][] = [];
      const healths: boolean[] = [];
      const e = entry({ url, event_endpoint: 'tcp://127.0.0.1:7000', ...over });
      const sink = {
        putEngine: (en: EngineEntry, identity: string | null) => {
          puts.push({ identity, entry: en });
          return null;
        },
        engineLoad: () => undefined,
        engineHealth: (_: string, healthy: boolean) => void healths.push(healthy),
        engineModels: () => undefined,
      };
      scraper = new EngineScraper(e, sink, { refreshIntervalMs: 60000, failedProbesToSuspect: 1, requestTimeoutMs: 1000, nowMs: () => performance.now(), report: (_n, what, detail) => void reports.push([what, detail]) });
      const endpoints = (i: number): string[] => {
        const p = puts[i]!.entry;
        return p.eventSources === null ? [`ports ${p.eventEndpoint}`] : p.eventSources.map((s) => s.endpoint);
      };
      return { puts, reports, healths, endpoints };
    }

    const served = (ports: number[]): { status: number; body: string } => ({
      status: 200,
      body: JSON.stringify(ports.map((p, r) => ({ data_parallel_rank: r, endpoint: `tcp://*:${p}`, replay_endpoint: null, topic: '' }))),
    });

    it('E17 asked before admission: the first put carries the answer\'s streams on the engine\'s address', async () => {
      const answers = { health: 200, startTime: '100.5', sources: served([41001, 41002]), sourcesAsked: 0 };
      const s = start(await engine(answers));
      await scraper!.tick();
      expect(s.puts.length).to.equal(1);
      expect(s.endpoints(0)).to.deep.equal(['tcp://127.0.0.1:41001', 'tcp://127.0.0.1:41002']);
      expect(s.puts[0]!.entry.dpSize).to.equal(2);
      expect(s.reports).to.deep.include(['event_sources', 'GET /kv_event_sources: rank 0 tcp://127.0.0.1:41001, rank 1 tcp://127.0.0.1:41002']);
      await scraper!.tick();
      expect(answers.sourcesAsked, 'not asked again while the process lives').to.equal(1);
    });

    it('E17 an engine without the route (404) uses the entry\'s ports; an unusable answer too, reported as malformed', async () => {
      const answers = { health: 200, startTime: '100.5', sources: { status: 404, body: '{"detail":"Not Found"}' }, sourcesAsked: 0 };
      const s = start(await engine(answers));
      await scraper!.tick();
      expect(s.endpoints(0)).to.deep.equal(['ports tcp://127.0.0.1:7000']);
      expect(s.reports.map((r) => r[0])).to.include('event_sources');
      await scraper!.close();

      answers.sources = { status: 200, body: '{"sources": []}' };
      const m = start(`http://127.0.0.1:${(server!.address() as AddressInfo).port}`);
      await scraper!.tick();
      expect(m.endpoints(0)).to.deep.equal(['ports tcp://127.0.0.1:7000']);
      expect(m.reports.find((r) => r[0] === 'event_sources_malformed')?.[1]).to.match(/^GET http:\/\/127\.0\.0\.1:\d+\/kv_event_sources: expected a JSON array/);
    });

    it('E17 a 503 or an unreachable route is asked again and admission waits for an answer', async () => {
      const answers = { health: 200, startTime: '100.5', sources: { status: 503, body: '' }, sourcesAsked: 0 };
      const s = start(await engine(answers));
      await scraper!.tick();
      expect(s.puts).to.deep.equal([]);
      expect(s.reports.map((r) => r[0])).to.include('event_sources_failed');
      answers.sources = served([41001]);
      await scraper!.tick();
      expect(s.endpoints(0)).to.deep.equal(['tcp://127.0.0.1:41001']);
    });

    it('E17 a new process (another identity) is asked again before it replaces the old one: never put on its predecessor\'s ports', async () => {
      const answers = { health: 200, startTime: '100.5', sources: served([41001]), sourcesAsked: 0 };
      const s = start(await engine(answers));
      await scraper!.tick();
      answers.startTime = '200.25';
      answers.sources = served([42001]);
      await scraper!.tick();
      await waitFor(() => s.puts.some((p) => p.identity === '200.25'), 2000, 'the new process admitted');
      for (const p of s.puts) expect([p.identity, p.entry.eventSources?.[0]?.endpoint]).to.deep.equal(p.identity === '100.5' ? ['100.5', 'tcp://127.0.0.1:41001'] : ['200.25', 'tcp://127.0.0.1:42001']);
      expect(answers.sourcesAsked).to.equal(2);
    });

    it('E17 back from SUSPECT it is asked again (a restart of an engine without identity shows only there)', async () => {
      const answers = { health: 200, startTime: '100.5', sources: served([41001]), sourcesAsked: 0 };
      const s = start(await engine(answers));
      await scraper!.tick();
      answers.health = 503;
      await scraper!.tick();
      expect(s.healths.at(-1)).to.equal(false);
      answers.health = 200;
      answers.sources = served([43001]);
      await scraper!.tick(); // healthy again: asks on the next pass
      await scraper!.tick();
      expect(answers.sourcesAsked).to.equal(2);
      expect(s.endpoints(s.puts.length - 1)).to.deep.equal(['tcp://127.0.0.1:43001']);
    });
  });
});
