// The router's status page (`GET /`, polling `GET /v1/status`) as an operator sees it: loaded in
// headless Chromium (puppeteer-core, CDP over --remote-debugging-pipe) from a real router over a real directory and
// simulated engines, checked by what the page SHOWS — table cells and chart points read from the DOM.
//
//   SimEngine ×2 ──etcd/heartbeat/ZMQ──▶ directory-svc ──WatchView──▶ router (CAR) ◀── this test: /v1/completions, /v1/route
//                                                                        ▲   GET / and /v1/status every second
//                                                                        └── headless Chromium ◀── CDP (fds 3/4) ── this test
//
// A second test serves the same page with hostile names beside it, proving every string from the
// status JSON reaches the DOM as text. The browser is killed in afterEach; waits poll a condition.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseRouterFlags, type RouterFlags } from '../../shared/config/router-flags.js';
import { silentLogger } from '../../shared/log/logger.js';
import { RouterService } from '../../router-svc/router-service.js';
import { STATUS_PAGE_CSP, STATUS_PAGE_HTML } from '../../router-svc/status/status-page-html.js';
import type { WireStatus } from '../../router-svc/status/status-snapshot.js';
import { EtcdServer } from '../helpers/etcd-server.js';
import { ensureChromium, HeadlessChromium } from '../helpers/headless-chromium.js';
import { waitFor } from '../helpers/ports.js';
import { DirectoryProcess, SimEngine, untilCandidates, type WireQueryAnswer } from '../helpers/router-stack.js';

const NAMESPACE = 'status-page-test';
/** 4 complete blocks of 4 tokens (STACK_DISCOVERY block_size 4) plus a partial one. */
const PROMPT = [501, 502, 503, 504, 511, 512, 513, 514, 521, 522, 523, 524, 531, 532, 533, 534, 541, 542];
/** Left in place after the run so a person can look at what the test saw. */
const SCREENSHOT = join(tmpdir(), 'router-status-page.png');

function flagsOf(args: string[]): RouterFlags {
  const parsed = parseRouterFlags(args);
  if (parsed.kind !== 'flags') throw new Error('unexpected --help');
  return parsed.flags;
}

async function postJson<T>(url: string, body: unknown): Promise<{ status: number; json: T; headers: Headers }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as T, headers: res.headers };
}

interface ShownInstance {
  name: string;
  type: string;
  models: string;
  state: string;
  routing: string;
  waiting: string;
}

interface ShownStream {
  instance: string;
  rank: string;
  sync: string;
  sequence: string;
  device: string;
  host: string;
  error: string;
}

/** The instance table's rows as the page shows them. */
const READ_INSTANCES = `[...document.querySelectorAll('#instances tbody tr:not(.empty)')].map((tr) => ({
  name: tr.querySelector('.name').textContent, type: tr.querySelector('.type').textContent,
  models: tr.querySelector('.models').textContent,
  state: tr.querySelector('.state').textContent, routing: tr.querySelector('.schedulable').textContent,
  waiting: tr.querySelector('.waiting').textContent }))`;

/** The stream table's rows as the page shows them. */
const READ_STREAMS = `[...document.querySelectorAll('#streams tbody tr:not(.empty)')].map((tr) => ({
  instance: tr.querySelector('.instance').textContent, rank: tr.querySelector('.rank').textContent,
  sync: tr.querySelector('.sync').textContent, sequence: tr.querySelector('.sequence').textContent,
  device: tr.querySelector('.device').textContent, host: tr.querySelector('.host').textContent,
  error: tr.querySelector('.err').textContent }))`;

/** Chart points (mean per second) and whether each is drawn above the 0.00 gridline. */
const READ_CHART = `(() => {
  const chart = document.getElementById('hit-ratio-chart');
  const zero = [...chart.querySelectorAll('line.grid')].map((l) => Number(l.getAttribute('y1'))).reduce((a, b) => Math.max(a, b), 0);
  return [...chart.querySelectorAll('circle.point')].map((c) => ({ mean: Number(c.dataset.mean), count: Number(c.dataset.count), aboveZero: Number(c.getAttribute('cy')) < zero }));
})()`;

describe('router status page (GET / and /v1/status) in headless Chromium', function () {
  this.timeout(120000);
  let chromiumPath = '';
  let browser: HeadlessChromium | null = null;

  before(function () {
    // Installing chromium (as root, when missing) can take minutes on a slow mirror.
    this.timeout(15 * 60_000);
    const found = ensureChromium();
    if (found.kind === 'missing') {
      console.warn(`    skipping the status page suite: ${found.reason}`);
      this.skip();
    } else {
      chromiumPath = found.path;
    }
  });

  afterEach(async () => {
    await browser?.close();
    browser = null;
  });

  async function openBrowser(): Promise<HeadlessChromium> {
    browser = await HeadlessChromium.launch({ executable: chromiumPath, width: 1280, height: 900 });
    return browser;
  }

  describe('against a real router, directory and simulated engines', () => {
    let etcd: EtcdServer;
    let directory: DirectoryProcess;
    let engines: SimEngine[] = [];
    let router: RouterService | null = null;

    before(async function () {
      if (chromiumPath === '') this.skip();
      etcd = await EtcdServer.start();
      directory = await DirectoryProcess.start({ etcdAddress: etcd.address, namespace: NAMESPACE });
    });
    after(async () => {
      await directory?.close();
      await etcd?.destroy();
    });
    afterEach(async () => {
      await router?.close();
      router = null;
      for (const e of engines) await e.close();
      engines = [];
    });

    it('shows the instances and their states, synchronized streams with the query endpoint’s sequence and device/host blocks, and a non-zero hit-ratio point after a repeated prompt', async () => {
      for (const waiting of [0, 3]) {
        engines.push(await SimEngine.start({ etcdAddress: etcd.address, namespace: NAMESPACE, directoryHttpUrl: directory.httpUrl, waiting }));
      }
      router = await RouterService.start({
        flags: flagsOf([`--directory_addr=${directory.address}`, '--load_balance_policy=CAR']),
        logger: silentLogger,
        host: '127.0.0.1',
        httpPort: 0,
      });
      const url = `http://127.0.0.1:${router.port}`;
      const names = engines.map((e) => e.name);
      await untilCandidates(router.view, names);
      // The second engine's queue must be in the view before routing: then CAR deterministically
      // sends the prompt, and its repeats, to the first engine (a tie would rotate between them).
      await waitFor(() => router!.view.instance(names[1]!)?.load?.waitingRequestsNum === 3, 20000, `${names[1]} reporting 3 waiting`);

      // First send: the prompt becomes resident on the engine that prefilled it.
      const first = await postJson<{ usage?: unknown }>(`${url}/v1/completions`, { model: 'status', prompt: PROMPT, max_tokens: 2 });
      expect(first.status).to.equal(200);
      await waitFor(
        async () => {
          const q = (await postJson<WireQueryAnswer>(`${url}/v1/internal/kv-cache/query`, { token_ids: PROMPT })).json;
          return q.matches.some((m) => m.device_hit_tokens >= 16);
        },
        20000,
        'the prompt resident in the router view',
      );
      // Repeats: CAR credits the resident prefix, so the chosen prefill's kv_hit_ratio is > 0 (dry
      // runs: counted decisions would add in-flight load and move the repeats elsewhere).
      for (let i = 0; i < 3; i++) {
        const r = await postJson<{ candidates: { instance_name: string; kv_hit_ratio: number }[]; prefill: { name: string } }>(`${url}/v1/route`, { token_ids: PROMPT, dry_run: true });
        expect(r.status).to.equal(200);
        const chosen = r.json.candidates.find((c) => c.instance_name === r.json.prefill.name);
        expect(chosen?.kv_hit_ratio, 'the route answer credits the repeat').to.be.greaterThan(0);
      }

      const page = await openBrowser();
      await page.goto(`${url}/`);
      for (const n of names) await page.waitForSelector(`#instances tbody tr[data-name=${JSON.stringify(n)}]`);
      // The chart closes a second at the router's next tick and the page polls once a second.
      await page.waitForFunction(`${READ_CHART}.some((p) => p.mean > 0)`, 10000, 'a non-zero hit-ratio point in the chart');

      // Instances: names and states as the view holds them.
      const shownInstances = await page.evaluate<ShownInstance[]>(READ_INSTANCES);
      expect(shownInstances.map((i) => i.name)).to.deep.equal([...names].sort());
      for (const i of shownInstances) {
        expect(i.state).to.equal('ACTIVE');
        expect(i.type).to.equal('DEFAULT');
        expect(i.routing).to.equal('candidate');
        // cache-identity §1: the simulators' registrations name no models: unknown, any model.
        expect(i.models).to.equal('unknown (any model)');
      }
      const byName = new Map(shownInstances.map((i) => [i.name, i]));
      expect(byName.get(engines[1]!.name)!.waiting).to.equal('3');

      // Streams: what the query endpoint answers (empty token_ids: state and residency of every
      // stream). Traffic has stopped, so the page converges on it within a poll or two.
      const query = (await postJson<WireQueryAnswer>(`${url}/v1/internal/kv-cache/query`, { token_ids: [] })).json;
      expect(query.matches).to.have.length(2);
      expect(query.matches.every((m) => m.synchronized)).to.equal(true);
      expect(query.matches.find((m) => m.instance_name === names[0])!.device_blocks, 'the prompt’s blocks on the first engine').to.be.at.least(4);
      const want: ShownStream[] = query.matches.map((m) => ({
        instance: m.instance_name,
        rank: String(m.dp_rank),
        sync: 'synchronized',
        sequence: String(m.sequence),
        device: String(m.device_blocks),
        host: String(m.host_blocks),
        error: m.error,
      }));
      let shownStreams: ShownStream[] = [];
      await waitFor(
        async () => {
          shownStreams = await page.evaluate<ShownStream[]>(READ_STREAMS);
          return JSON.stringify(shownStreams) === JSON.stringify(want);
        },
        10000,
        `the stream table to show ${JSON.stringify(want)} (last shown ${JSON.stringify(shownStreams)})`,
      );

      // The chart: every point is a second with decisions; the repeat's is drawn above zero.
      const points = await page.evaluate<{ mean: number; count: number; aboveZero: boolean }[]>(READ_CHART);
      const hit = points.filter((p) => p.mean > 0);
      expect(hit.length).to.be.greaterThan(0);
      expect(hit.every((p) => p.aboveZero && p.count > 0)).to.equal(true);
      const decisions = Number(await page.evaluate<string>(`document.getElementById('decisions').textContent`));
      expect(decisions).to.equal(4); // the proxied completion and three routes
      expect(await page.evaluate<string>(`document.getElementById('policy').textContent`)).to.equal('CAR');
      expect(await page.evaluate<string>(`document.getElementById('freshness').textContent`)).to.equal('fresh');

      // The JSON the page drew from carries the same view.
      const status = (await (await fetch(`${url}/v1/status`)).json()) as WireStatus;
      expect(status.view.version).to.match(/^\d+$/);
      expect(status.streams.map((s) => [s.instance_name, s.synchronized])).to.deep.equal(query.matches.map((m) => [m.instance_name, true]));

      await page.screenshot(SCREENSHOT, { fullPage: true });
      expect(statSync(SCREENSHOT).size).to.be.greaterThan(10_000);
    });
  });

  describe('against hostile strings', () => {
    let server: Server | null = null;

    afterEach(async () => {
      if (server !== null) {
        const s = server;
        await new Promise<void>((resolve) => {
          s.close(() => resolve());
          s.closeAllConnections(); // the browser's keep-alive connections
        });
      }
      server = null;
    });

    it('puts names and errors from the status JSON into the DOM as text only, and says when the view is stale', async () => {
      const evilName = '<img src=x onerror="window.__pwned=1">:8000';
      const evilError = '</td><script>window.__pwned=2</script><b>bold</b>';
      const status: WireStatus = {
        now_ms: Date.now(),
        policy: { name: '<i>CAR</i>' },
        view: { epoch: '"><svg onload=window.__pwned=3>', version: '7', stale: true, stale_reason: '<u>gone</u>', since_heard_ms: 4200 },
        instances: [
          {
            name: evilName,
            type: 'MIX',
            role: 'PREFILL',
            state: 'SUSPECT',
            schedulable: false,
            candidate: false,
            incarnation_id: '<script>x</script>',
            register_ts_ms: 0,
            dp_size: 1,
            models: [
              { name: '<b>base</b>', parent: null },
              { name: '<script>window.__pwned=4</script>', parent: '<b>base</b>' },
            ],
            source: '<i>etcd</i>',
            load: { waiting_requests_num: 2, gpu_cache_usage_perc: 0.5, reported_at_ms: 0 },
          },
        ],
        streams: [
          { instance_name: evilName, dp_rank: 0, block_size: 4, synchronized: false, sequence: '-1', error: evilError, device_blocks: 0, host_blocks: 0, incarnation_id: '' },
        ],
        hit_ratio: { interval_ms: 1000, decisions: 0, points: [] },
        tokenizer: { path: '/models/<b>evil</b>', vocab_size: 7, fingerprint: 'ab', chat_template: '<script>t</script>', segment_cache: true, render_threads: 1 },
        model_tokenizers: [
          { model: '<b>base</b>', tokenizer: { path: '/models/<svg onload=window.__pwned=5>', vocab_size: 9, fingerprint: 'cd', chat_template: '', segment_cache: true, render_threads: 0 } },
        ],
        untokenized_requests: { total: 2, by_reason: { template_error: 2 } },
      };
      server = createServer((req, res) => {
        if (req.url === '/') {
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': STATUS_PAGE_CSP });
          res.end(STATUS_PAGE_HTML);
        } else if (req.url === '/v1/status') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ ...status, now_ms: Date.now() }));
        } else {
          res.writeHead(404).end();
        }
      });
      await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', () => resolve()));
      const addr = server.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;

      const page = await openBrowser();
      await page.goto(`http://127.0.0.1:${port}/`);
      await page.waitForSelector('#streams tbody tr[data-rank="0"]');
      const shown = await page.evaluate<{ name: string; error: string; policy: string; epoch: string; banner: string; injected: number; pwned: unknown }>(`({
        name: document.querySelector('#instances tbody .name').textContent,
        error: document.querySelector('#streams tbody .err').textContent,
        policy: document.getElementById('policy').textContent,
        epoch: document.getElementById('epoch').textContent,
        banner: document.getElementById('banner').textContent,
        injected: document.querySelectorAll('tbody img, tbody script, tbody b, tbody svg, td > i, #banner *, #policy *, #epoch *').length,
        pwned: window.__pwned,
      })`);
      expect(shown.name).to.equal(evilName);
      expect(shown.error).to.equal(evilError);
      expect(shown.policy).to.equal('<i>CAR</i>');
      expect(shown.epoch).to.equal(status.view.epoch);
      expect(shown.banner).to.include('stale').and.include('<u>gone</u>');
      expect(shown.injected, 'elements created from status strings').to.equal(0);
      expect(await page.evaluate<string>(`document.getElementById('tok-path').textContent`)).to.equal('/models/<b>evil</b>');
      expect(await page.evaluate<string>(`document.getElementById('tok-untokenized').textContent`)).to.equal('2 (template_error 2)');
      expect(await page.evaluate<string>(`document.getElementById('tok-threads').textContent`)).to.equal('1, segment cache on');
      expect(await page.evaluate<number>(`document.querySelectorAll('#tokenizer b, #tokenizer script, #model-tokenizers svg, #model-tokenizers b').length`)).to.equal(0);
      const perModel = await page.evaluate<string[]>(`[...document.querySelectorAll('#model-tokenizers tbody td')].map((td) => td.textContent)`);
      expect(perModel.slice(0, 3)).to.deep.equal(['<b>base</b>', '/models/<svg onload=window.__pwned=5>', '9']);
      expect(perModel[4]).to.equal('none: chat requests are routed by load');
      expect(shown.pwned).to.equal(undefined);
      const instanceRow = await page.evaluate<string[]>(`[...document.querySelectorAll('#instances tbody td')].map((td) => td.textContent)`);
      expect(instanceRow.slice(1, 6)).to.deep.equal([
        'MIX / PREFILL',
        '<b>base</b>, <script>window.__pwned=4</script> (adapter of <b>base</b>)',
        '<i>etcd</i>',
        'SUSPECT',
        'not schedulable',
      ]);
      expect(await page.evaluate<string>(`document.querySelector('#hit-ratio-chart text.none').textContent`)).to.match(/no routing decisions/);
      await page.screenshot(join(tmpdir(), 'router-status-page-hostile.png'));
    });
  });
});
