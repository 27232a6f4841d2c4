// kvcm-meta §1 transport over the real MetaService (HTTP on a free port, SQLite in a temp dir):
// conformance rows T-01..T-04, plus the HTTP edge's own duties (§1.2 statuses, §1.4 header,
// SERVICE_NOT_READY while starting, the §9.3 drain) on a bare MetaHttpServer.
import { expect } from 'chai';
import { silentLogger } from '../../shared/log/logger.js';
import { MetaHttpServer } from '../../meta-svc/http/meta-http-server.js';
import { createMetaMetrics } from '../../meta-svc/http/meta-metrics.js';
import { MetaError } from '../../meta-svc/meta-errors.js';
import { MetaHarness, capturingLogger } from '../helpers/meta-service-harness.js';
import type { AnyJson } from '../helpers/meta-service-harness.js';

const HEX32 = /^[0-9a-f]{32}$/;
const BIG = '9007199254740993';

/** Body text without `request_id` (T-01: identical apart from it). */
const withoutRequestId = (text: string): string => text.replace(/"request_id":"[0-9a-f]{32}"/, '"request_id":""');

describe('kvcm-meta §1 transport', () => {
  let h: MetaHarness | null = null;

  afterEach(async () => {
    await h?.close();
    h?.removeDir();
    h = null;
  });

  it('T-01 snake/camel names, enum as number or name, int64 as number or string: identical responses, 9007199254740993 exact', async () => {
    h = await MetaHarness.start();
    // Write two keys (one beyond 2^53) and finish them so the lookups hit and echo the keys in URIs.
    const start = await h.rpc('startWriteCache', `{"instance_id":"test_instance","block_keys":[123,${BIG}]}`);
    expect(start.body.header.status.code).to.equal('OK');
    const finish = await h.rpc('finishWriteCache', {
      instance_id: 'test_instance',
      write_session_id: start.body.write_session_id,
      success_blocks: { offset: 2 },
    });
    expect(finish.body.header.status.code).to.equal('OK');

    const bodies = [
      `{"instance_id":"test_instance","query_type":2,"block_keys":[123,${BIG}]}`,
      `{"instanceId":"test_instance","queryType":"QT_PREFIX_MATCH","blockKeys":["123","${BIG}"]}`,
      `{"instance_id":"test_instance","queryType":2,"block_keys":["123",${BIG}]}`,
      `{"instanceId":"test_instance","query_type":"QT_PREFIX_MATCH","blockKeys":[123,"${BIG}"]}`,
    ];
    const replies = await Promise.all(bodies.map((b) => h!.rpc('getCacheLocation', b)));
    for (const r of replies) {
      expect(r.status).to.equal(200);
      expect(r.body.header.status.code).to.equal('OK');
      expect(r.body.header.request_id).to.match(HEX32);
    }
    const first = withoutRequestId(replies[0]!.text);
    for (const r of replies.slice(1)) expect(withoutRequestId(r.text)).to.equal(first);
    const locations = replies[0]!.body.locations as AnyJson[];
    expect(locations).to.have.length(2);
    expect(locations[1]!.location_specs[0].uri).to.equal(`file://local_file/data/kvcm/test_instance/${BIG}_tp0?offset=0&size=4096000`);

    // int64 outputs are JSON strings: getCacheMetaDetail echoes block_key.
    const detail = await h.rpc('getCacheMetaDetail', `{"instance_id":"test_instance","block_keys":[${BIG}]}`);
    expect(detail.text).to.contain(`"block_key":"${BIG}"`);
    expect(detail.body.items[0].locations[0].create_time).to.be.a('string');
  });

  it('T-02 malformed bodies → HTTP 400, body exactly {}, WARN logged', async () => {
    const cap = capturingLogger('debug');
    h = await MetaHarness.start({ logger: cap.logger });
    const bodies = [
      '{bad',
      '',
      '[]',
      '"text"',
      '{"instance_id":"test_instance","block_keys":["abc"]}',
      '{"instance_id":"test_instance","block_keys":[1.5]}',
      '{"instance_id":"test_instance","block_keys":[1],"blockKeys":[2]}',
      '{"instance_id":"test_instance","block_keys":[1]} trailing',
      '{"instance_id":7}',
    ];
    for (const b of bodies) {
      const r = await h.rpc('getCacheLocation', b);
      expect(r.status, b).to.equal(400);
      expect(r.text, b).to.equal('{}');
      expect(r.contentType).to.equal('application/json');
    }
    const invalidUtf8 = await h.request('POST', '/api/getCacheLocation', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]));
    expect(invalidUtf8.status).to.equal(400);
    expect(invalidUtf8.text).to.equal('{}');

    const warns = cap.lines.filter((l) => l.level === 40 && l.status === 400);
    expect(warns).to.have.length(bodies.length + 1);
    for (const w of warns) {
      expect(w.route).to.equal('/api/getCacheLocation');
      expect(w.bytes).to.be.a('number');
      expect(w.reason).to.be.a('string').and.not.equal('');
    }
    expect(warns.some((w) => /block_keys\[0\]/.test(w.reason as string))).to.equal(true);
    const metrics = await h.request('GET', '/metrics');
    expect(metrics.text).to.match(/kvcm_http_requests_total\{api="getCacheLocation",code="http_400"\} 10/);
  });

  it('T-03 unknown fields ignored at any depth, unknown enum → 0, a miss prints locations [] and the full header', async () => {
    const cap = capturingLogger('debug');
    h = await MetaHarness.start({ logger: cap.logger });
    const r = await h.rpc('getCacheLocation', {
      trace_id: 'trace-t03',
      instance_id: 'test_instance',
      query_type: 'QT_NOT_A_TYPE',
      block_keys: ['42'],
      block_mask: { offset: 0, zz: { deeper: [1, { x: null }] } },
      unknown_top: { a: [1, 2, { b: 'c' }] },
    });
    expect(r.status).to.equal(200);
    expect(r.text).to.match(/^\{"header":\{"status":\{"code":"OK","message":""\},"request_id":"[0-9a-f]{32}","tracer_result":""\},"locations":\[\]\}$/);
    // §1.4: the request_id is logged with the request's trace_id.
    const logged = cap.lines.filter((l) => l.request_id === r.body.header.request_id);
    expect(logged.length).to.be.greaterThan(0);
    expect(logged.every((l) => l.trace_id === 'trace-t03')).to.equal(true);
  });

  it('T-04 /health, /metrics, unknown path 404, wrong method 405, oversized body 413', async () => {
    const cap = capturingLogger('debug');
    h = await MetaHarness.start({
      logger: cap.logger,
      configText: JSON.stringify({
        http: { max_body_bytes: 1024 },
        storages: [{ global_unique_name: 'local_file', type: 'file', root_path: '/data/kvcm' }],
        instance_groups: [{ name: 'test_group', storage_candidates: ['local_file'] }],
      }),
    });
    const health = await h.request('GET', '/health');
    expect([health.status, health.text, health.contentType]).to.deep.equal([200, '{"status":"ok"}', 'application/json']);

    const nope = await h.rpc('nope', {});
    expect([nope.status, nope.text]).to.deep.equal([404, '{}']);
    const root = await h.request('GET', '/');
    expect([root.status, root.text]).to.deep.equal([404, '{}']);
    const wrongMethod = await h.request('GET', '/api/getCacheLocation');
    expect([wrongMethod.status, wrongMethod.text]).to.deep.equal([405, '{}']);
    const put = await h.request('PUT', '/api/registerInstance', '{}');
    expect([put.status, put.text]).to.deep.equal([405, '{}']);

    const oversized = await h.rpc('getCacheLocation', JSON.stringify({ instance_id: 'x', pad: 'p'.repeat(2000) }));
    expect([oversized.status, oversized.text]).to.deep.equal([413, '{}']);
    const justFits = await h.rpc('getClusterInfo', JSON.stringify({ pad: 'p'.repeat(1000) }));
    expect(justFits.status).to.equal(200);

    const metrics = await h.request('GET', '/metrics');
    expect(metrics.status).to.equal(200);
    expect(metrics.contentType).to.match(/^text\/plain; version=0\.0\.4/);
    for (const name of [
      'kvcm_http_requests_total',
      'kvcm_http_request_duration_seconds',
      'kvcm_lookup_blocks_total',
      'kvcm_write_sessions_active',
      'kvcm_write_sessions_expired_total',
      'kvcm_write_session_instance_mismatch_total',
      'kvcm_report_event_items_total',
      'kvcm_event_reporters',
      'kvcm_snapshot_total',
      'kvcm_cleanup_deleted_locations_total',
      'kvcm_store_tx_duration_seconds',
    ]) {
      expect(metrics.text).to.contain(`# TYPE ${name} `);
    }
    expect(metrics.text).to.match(/kvcm_http_requests_total\{api="unknown",code="http_404"\} 2/);
    expect(metrics.text).to.match(/kvcm_http_requests_total\{api="getCacheLocation",code="http_405"\} 1/);
    expect(metrics.text).to.match(/kvcm_http_requests_total\{api="getCacheLocation",code="http_413"\} 1/);
    expect(metrics.text).to.match(/kvcm_http_requests_total\{api="getClusterInfo",code="OK"\} 1/);
    const warns = cap.lines.filter((l) => l.level === 40 && typeof l.status === 'number');
    expect(warns.map((w) => w.status)).to.deep.equal([404, 404, 405, 405, 413]);
    expect(warns[4]!.bytes).to.be.greaterThan(1024);
  });
});

describe('kvcm-meta §1.2/§1.4/§9.3 HTTP edge', () => {
  let server: MetaHttpServer | null = null;

  afterEach(async () => {
    await server?.close();
    server = null;
  });

  async function startServer(): Promise<{ s: MetaHttpServer; url: string }> {
    const s = new MetaHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20, logger: silentLogger, metrics: createMetaMetrics() });
    server = s;
    const port = await s.listen();
    return { s, url: `http://127.0.0.1:${port}` };
  }

  const post = async (url: string, rpc: string, body = '{}'): Promise<{ status: number; body: AnyJson; text: string }> => {
    const res = await fetch(`${url}/api/${rpc}`, { method: 'POST', body });
    const text = await res.text();
    return { status: res.status, body: JSON.parse(text) as AnyJson, text };
  };

  it('while starting: /health 503 "starting", /api/* SERVICE_NOT_READY with the response defaults', async () => {
    const { s, url } = await startServer();
    const health = await fetch(`${url}/health`);
    expect(health.status).to.equal(503);
    expect(await health.text()).to.equal('{"status":"starting"}');
    const r = await post(url, 'reportEvent');
    expect(r.status).to.equal(200);
    expect(r.body.header.status.code).to.equal('SERVICE_NOT_READY');
    expect(r.text).to.contain('"item_results":[],"committed_snapshot_version":"","retry_after_ms":"0","snapshot_required":false,"extra_info":""');
    s.markServing();
    expect((await fetch(`${url}/health`)).status).to.equal(200);
  });

  it('handler outcomes: unregistered → UNSUPPORTED, MetaError → its code, other exception → INTERNAL_ERROR, unserializable → 500 {}', async () => {
    const { s, url } = await startServer();
    s.registerRpc('getCacheLocation', async () => {
      throw new MetaError('INSTANCE_NOT_EXIST', 'no such instance');
    });
    s.registerRpc('getCacheLocationLen', async () => {
      throw new Error('boom');
    });
    s.registerRpc('getCacheMeta', async () => ({ fields: { locations: [Number.NaN] } }));
    s.registerRpc('startWriteCache', async () => ({ fields: { write_session_id: 'w', block_mask: { offset: 0 }, locations: [] } }));
    s.markServing();
    const unsupported = await post(url, 'trimCache');
    expect(unsupported.body.header.status.code).to.equal('UNSUPPORTED');
    const meta = await post(url, 'getCacheLocation');
    expect(meta.body.header.status).to.deep.equal({ code: 'INSTANCE_NOT_EXIST', message: 'no such instance' });
    expect(meta.body.locations).to.deep.equal([]);
    const internal = await post(url, 'getCacheLocationLen');
    expect(internal.body.header.status.code).to.equal('INTERNAL_ERROR');
    expect(internal.body.cache_location_len).to.equal('0');
    const res = await fetch(`${url}/api/getCacheMeta`, { method: 'POST', body: '{}' });
    expect([res.status, await res.text()]).to.deep.equal([500, '{}']);
    // Handler field order is kept after the header.
    const ordered = await post(url, 'startWriteCache');
    expect(ordered.text.replace(/"request_id":"[0-9a-f]{32}"/, '')).to.equal(
      '{"header":{"status":{"code":"OK","message":""},,"tracer_result":""},"write_session_id":"w","block_mask":{"offset":0},"locations":[]}',
    );
  });

  it('§9.3 drain: /health 503 "stopping", new requests SERVICE_NOT_READY, in-flight requests finish, then the listener closes', async () => {
    const { s, url } = await startServer();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inHandler = new Promise<void>((r) => (entered = r));
    s.registerRpc('getClusterInfo', async () => {
      entered();
      await gate;
      return { fields: { self_node_id: 'n', leader_node_id: 'n' } };
    });
    const drainHookRan: string[] = [];
    s.onDrain(() => {
      drainHookRan.push('hook');
    });
    s.markServing();

    const inFlight = post(url, 'getClusterInfo');
    await inHandler;
    const closed = s.close();
    expect(s.state).to.equal('stopping');
    expect(drainHookRan).to.deep.equal(['hook']);
    const health = await fetch(`${url}/health`);
    expect([health.status, await health.text()]).to.deep.equal([503, '{"status":"stopping"}']);
    const late = await post(url, 'getClusterInfo');
    expect(late.body.header.status.code).to.equal('SERVICE_NOT_READY');
    release();
    const first = await inFlight;
    expect(first.body.header.status.code).to.equal('OK');
    expect(first.body.self_node_id).to.equal('n');
    await closed;
    let refused = false;
    try {
      await fetch(`${url}/health`);
    } catch {
      refused = true;
    }
    expect(refused).to.equal(true);
  });
});
