// kv-events §9 (limits, static streams), §1 (connectable endpoints) and discovery.md's config
// block: every default, every bound, every cross-field rule, one-line errors naming the field.
import { expect } from 'chai';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../../shared/config/config-error.js';
import {
  parseKvEventsConfig,
  readKvEventsConfigFile,
  validateKvEventsConfig,
  type KvEventsConfig,
} from '../../../shared/config/kv-events-config.js';

const stream = (i: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  instance_name: `10.0.0.${i}:8000`,
  endpoint: `tcp://10.0.0.${i}:18000`,
  replay_endpoint: `tcp://10.0.0.${i}:38000`,
  ...extra,
});

function fails(json: unknown): ConfigError {
  try {
    validateKvEventsConfig(json);
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    const ce = e as ConfigError;
    expect(ce.message).to.not.include('\n');
    expect(ce.message).to.equal(ce.path === '' ? ce.reason : `${ce.path}: ${ce.reason}`);
    return ce;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(json)}`);
}

describe('kv-events §9 configuration: limits', () => {
  it('§9 defaults: an empty object is a valid directory with no streams', () => {
    const c = validateKvEventsConfig({});
    expect(c).to.deep.equal({
      maxStreams: 128,
      limits: { maxBlocksPerStream: 262144, maxMessageBytes: 8388608, maxBufferedBytes: 16777216, replayTimeoutMs: 2000, resyncIntervalMs: 30000 },
      maxConcurrentRecoveries: 8,
      streams: [],
      discovery: null,
    } satisfies KvEventsConfig);
    expect(Object.isFrozen(c) && Object.isFrozen(c.limits) && Object.isFrozen(c.streams)).to.equal(true);
  });

  const bounds: Array<[string, number, number]> = [
    ['max_streams', 1, 128],
    ['max_blocks_per_stream', 1, 16777216],
    ['max_message_bytes', 65536, 67108864],
    ['replay_timeout_ms', 100, 60000],
    // Our extension beyond §9 (README): directory-wide cap on concurrent snapshot exchanges.
    ['max_concurrent_recoveries', 1, 128],
  ];
  for (const [field, min, max] of bounds) {
    it(`§9 ${field} accepts ${min}..${max} and rejects ${min - 1}, ${max + 1}, 1.5 and "7"`, () => {
      // max_message_bytes above the default buffer needs a larger buffer (the ≥ rule is tested below).
      const ctx = field === 'max_message_bytes' ? { max_buffered_bytes: 1073741824 } : field === 'replay_timeout_ms' ? { resync_interval_ms: 0 } : {};
      expect(() => validateKvEventsConfig({ ...ctx, [field]: min })).to.not.throw();
      expect(() => validateKvEventsConfig({ ...ctx, [field]: max })).to.not.throw();
      for (const bad of [min - 1, max + 1, 1.5, '7', null, true]) {
        const e = fails({ ...ctx, [field]: bad });
        expect(e.path).to.equal(field);
        expect(e.reason).to.equal(`expected an integer in ${min}..${max}, got ${JSON.stringify(bad)}`);
      }
    });
  }

  it('max_concurrent_recoveries (extension beyond §9): default 8, explicit values kept', () => {
    expect(validateKvEventsConfig({}).maxConcurrentRecoveries).to.equal(8);
    expect(validateKvEventsConfig({ max_concurrent_recoveries: 1 }).maxConcurrentRecoveries).to.equal(1);
    expect(validateKvEventsConfig({ max_concurrent_recoveries: 128, max_streams: 4 }).maxConcurrentRecoveries).to.equal(128);
    expect(fails({ max_concurrent_recoveries: 0 }).message).to.equal('max_concurrent_recoveries: expected an integer in 1..128, got 0');
  });

  it('§9 max_buffered_bytes in 65536..1073741824 and at least max_message_bytes', () => {
    expect(validateKvEventsConfig({ max_buffered_bytes: 1073741824 }).limits.maxBufferedBytes).to.equal(1073741824);
    expect(validateKvEventsConfig({ max_buffered_bytes: 65536, max_message_bytes: 65536 }).limits.maxBufferedBytes).to.equal(65536);
    expect(fails({ max_buffered_bytes: 65535 }).path).to.equal('max_buffered_bytes');
    expect(fails({ max_buffered_bytes: 1073741825 }).path).to.equal('max_buffered_bytes');
    const e = fails({ max_buffered_bytes: 65536 }); // below the default max_message_bytes 8388608
    expect(e.message).to.equal('max_buffered_bytes: expected at least max_message_bytes (8388608), got 65536');
    expect(() => validateKvEventsConfig({ max_buffered_bytes: 100000, max_message_bytes: 100000 })).to.not.throw();
    expect(fails({ max_buffered_bytes: 99999, max_message_bytes: 100000 }).path).to.equal('max_buffered_bytes');
  });

  it('§9 resync_interval_ms is 0 (off) or 1000..3600000, and above replay_timeout_ms', () => {
    expect(validateKvEventsConfig({ resync_interval_ms: 0 }).limits.resyncIntervalMs).to.equal(0);
    expect(validateKvEventsConfig({ resync_interval_ms: 2001 }).limits.resyncIntervalMs).to.equal(2001);
    expect(validateKvEventsConfig({ resync_interval_ms: 3600000 }).limits.resyncIntervalMs).to.equal(3600000);
    for (const bad of [1, 999, 3600001, -1, 1000.5, '30000']) {
      expect(fails({ resync_interval_ms: bad }).message).to.equal(`resync_interval_ms: expected an integer 0 (off) or in 1000..3600000, got ${JSON.stringify(bad)}`);
    }
    expect(fails({ resync_interval_ms: 2000 }).message).to.equal('resync_interval_ms: expected 0 or more than replay_timeout_ms (2000), got 2000');
    expect(fails({ resync_interval_ms: 1000, replay_timeout_ms: 5000 }).path).to.equal('resync_interval_ms');
    // The default 30000 is not above a 40000 replay timeout: the operator must choose.
    expect(fails({ replay_timeout_ms: 40000 }).path).to.equal('resync_interval_ms');
    expect(() => validateKvEventsConfig({ replay_timeout_ms: 40000, resync_interval_ms: 0 })).to.not.throw();
  });

  it('§9 unknown top-level fields and non-object roots are errors', () => {
    expect(fails({ max_stream: 5 }).message).to.match(/^max_stream: unknown field \(allowed: max_streams, /);
    for (const root of [[], 'x', 5, null]) expect(fails(root).path).to.equal('');
  });

  it('§9 JSON syntax errors and unreadable files are one-line ConfigErrors', () => {
    expect(() => parseKvEventsConfig('{"max_streams": ')).to.throw(ConfigError, /^not valid JSON: /);
    expect(() => readKvEventsConfigFile('/nonexistent/kv.json')).to.throw(ConfigError, 'cannot read "/nonexistent/kv.json" (ENOENT)');
    expect(readKvEventsConfigFile('')).to.equal(null);
    const dir = mkdtempSync(join(tmpdir(), 'kvcfg-'));
    try {
      const p = join(dir, 'kv.json');
      writeFileSync(p, JSON.stringify({ streams: [stream(1)] }));
      expect(readKvEventsConfigFile(p)?.streams).to.have.length(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('kv-events §9 configuration: static streams', () => {
  it('§9 stream defaults: dp_rank 0, block_size 128, topic "", hash_seed 1024, engine_kind xllm', () => {
    const c = validateKvEventsConfig({ streams: [stream(1)] });
    expect(c.streams[0]).to.deep.equal({
      instanceName: '10.0.0.1:8000',
      dpRank: 0,
      blockSize: 128,
      endpoint: 'tcp://10.0.0.1:18000',
      replayEndpoint: 'tcp://10.0.0.1:38000',
      topic: '',
      hashSeed: 1024,
      engineKind: 'xllm',
    });
    expect(Object.isFrozen(c.streams[0])).to.equal(true);
  });

  it('engines.md §1 engine_kind vllm/sglang: replay_endpoint optional (none = "")', () => {
    for (const kind of ['vllm', 'sglang'] as const) {
      const { replay_endpoint: _dropped, ...noReplay } = stream(1, { engine_kind: kind });
      const c = validateKvEventsConfig({ streams: [noReplay, stream(2, { engine_kind: kind })] });
      expect(c.streams[0]).to.include({ engineKind: kind, replayEndpoint: '' });
      expect(c.streams[1]).to.include({ engineKind: kind, replayEndpoint: 'tcp://10.0.0.2:38000' });
    }
  });

  it('engines.md §1 engine_kind xllm still requires replay_endpoint; an unknown kind is named', () => {
    const { replay_endpoint: _dropped, ...noReplay } = stream(1, { engine_kind: 'xllm' });
    expect(() => validateKvEventsConfig({ streams: [noReplay] })).to.throw('streams[0].replay_endpoint: required');
    expect(() => validateKvEventsConfig({ streams: [stream(1, { engine_kind: 'trtllm' })] })).to.throw(
      'streams[0].engine_kind: expected one of xllm, vllm, sglang, got "trtllm"',
    );
  });

  it('§9 explicit stream fields are kept', () => {
    const c = validateKvEventsConfig({ streams: [stream(1, { dp_rank: 3, block_size: 16, topic: 'xllm-kv', hash_seed: 2048 })] });
    expect(c.streams[0]).to.include({ dpRank: 3, blockSize: 16, topic: 'xllm-kv', hashSeed: 2048 });
  });

  it('§9 instance_name, endpoint and replay_endpoint are required', () => {
    for (const field of ['instance_name', 'endpoint', 'replay_endpoint']) {
      const s = stream(1);
      delete s[field];
      expect(fails({ streams: [stream(2), s] }).message).to.equal(`streams[1].${field}: required`);
    }
    expect(fails({ streams: [stream(1, { instance_name: '' })] }).path).to.equal('streams[0].instance_name');
    expect(fails({ streams: [stream(1, { instance_name: 7 })] }).path).to.equal('streams[0].instance_name');
    expect(fails({ streams: [stream(1, { instance_name: 'a\nb' })] }).path).to.equal('streams[0].instance_name');
  });

  it('§9 block_size 1..4096, hash_seed 0..2^53-1, dp_rank 0..1023, topic a string', () => {
    expect(validateKvEventsConfig({ streams: [stream(1, { block_size: 1 })] }).streams[0]!.blockSize).to.equal(1);
    expect(validateKvEventsConfig({ streams: [stream(1, { block_size: 4096 })] }).streams[0]!.blockSize).to.equal(4096);
    for (const bad of [0, 4097, 1.5, '128']) {
      expect(fails({ streams: [stream(1, { block_size: bad })] }).message).to.equal(`streams[0].block_size: expected an integer in 1..4096, got ${JSON.stringify(bad)}`);
    }
    expect(validateKvEventsConfig({ streams: [stream(1, { hash_seed: 0 })] }).streams[0]!.hashSeed).to.equal(0);
    expect(validateKvEventsConfig({ streams: [stream(1, { hash_seed: 2 ** 53 - 1 })] }).streams[0]!.hashSeed).to.equal(2 ** 53 - 1);
    for (const bad of [-1, 2 ** 53, 1.5]) {
      expect(fails({ streams: [stream(1, { hash_seed: bad })] }).message).to.match(/^streams\[0\]\.hash_seed: expected an integer in 0\.\.2\^53-1, got /);
    }
    expect(validateKvEventsConfig({ streams: [stream(1, { dp_rank: 1023 })] }).streams[0]!.dpRank).to.equal(1023);
    for (const bad of [-1, 1024, '0']) expect(fails({ streams: [stream(1, { dp_rank: bad })] }).path).to.equal('streams[0].dp_rank');
    expect(fails({ streams: [stream(1, { topic: 5 })] }).message).to.equal('streams[0].topic: expected a string, got 5');
  });

  it('§1 endpoints must be connectable tcp://host:port: never *, 0.0.0.0, port 0 or above 65535', () => {
    expect(fails({ streams: [stream(1), stream(2), stream(3, { endpoint: 'tcp://*:5557' })] }).message).to.equal(
      'streams[2].endpoint: expected a connectable tcp://host:port, got "tcp://*:5557"',
    );
    const bad = ['tcp://0.0.0.0:5557', 'tcp://[::]:5557', 'tcp://h:0', 'tcp://h:65536', 'tcp://h', 'udp://h:5', 'ipc:///tmp/x', 'tcp://:5', 'tcp://h:5/x', 'tcp://h :5', 'tcp://h:+5'];
    for (const ep of bad) {
      expect(fails({ streams: [stream(1, { replay_endpoint: ep })] }).message).to.equal(`streams[0].replay_endpoint: expected a connectable tcp://host:port, got ${JSON.stringify(ep)}`);
    }
    expect(fails({ streams: [stream(1, { endpoint: 18000 })] }).path).to.equal('streams[0].endpoint');
    const good = validateKvEventsConfig({ streams: [stream(1, { endpoint: 'tcp://[::1]:1', replay_endpoint: 'tcp://engine-0.local:65535' })] });
    expect(good.streams[0]).to.include({ endpoint: 'tcp://[::1]:1', replayEndpoint: 'tcp://engine-0.local:65535' });
  });

  it('§9 (instance_name, dp_rank) pairs are unique; the same instance on two ranks is fine', () => {
    const a = stream(1);
    const b = { ...stream(2), instance_name: a.instance_name };
    expect(fails({ streams: [a, b] }).message).to.equal('streams[1].dp_rank: (instance_name "10.0.0.1:8000", dp_rank 0) already used by streams[0]');
    expect(validateKvEventsConfig({ streams: [a, { ...b, dp_rank: 1 }] }).streams).to.have.length(2);
  });

  it('§1 endpoints are unique, and no endpoint is both an event and a replay endpoint', () => {
    expect(fails({ streams: [stream(1), stream(2, { endpoint: 'tcp://10.0.0.1:18000' })] }).message).to.equal(
      'streams[1].endpoint: "tcp://10.0.0.1:18000" already used as streams[0].endpoint',
    );
    expect(fails({ streams: [stream(1), stream(2, { replay_endpoint: 'tcp://10.0.0.1:38000' })] }).path).to.equal('streams[1].replay_endpoint');
    expect(fails({ streams: [stream(1), stream(2, { endpoint: 'tcp://10.0.0.1:38000' })] }).message).to.equal(
      'streams[1].endpoint: "tcp://10.0.0.1:38000" already used as streams[0].replay_endpoint',
    );
    expect(fails({ streams: [stream(1), stream(2, { replay_endpoint: 'tcp://10.0.0.1:18000' })] }).message).to.equal(
      'streams[1].replay_endpoint: "tcp://10.0.0.1:18000" already used as streams[0].endpoint',
    );
    expect(fails({ streams: [stream(1, { replay_endpoint: 'tcp://10.0.0.1:18000' })] }).path).to.equal('streams[0].replay_endpoint');
    // Host names compare case-insensitively.
    expect(fails({ streams: [stream(1, { endpoint: 'tcp://Engine:1' }), stream(2, { endpoint: 'tcp://engine:1' })] }).path).to.equal('streams[1].endpoint');
  });

  it('§9 more streams than max_streams is a start-up error', () => {
    const three = [stream(1), stream(2), stream(3)];
    expect(validateKvEventsConfig({ max_streams: 3, streams: three }).streams).to.have.length(3);
    expect(fails({ max_streams: 2, streams: three }).message).to.equal('streams: 3 entries exceed max_streams (2)');
  });

  it('§9 unknown stream fields and non-object entries are errors', () => {
    expect(fails({ streams: [stream(1, { hashseed: 1 })] }).message).to.match(/^streams\[0\]\.hashseed: unknown field/);
    expect(fails({ streams: [stream(1), 'x'] }).message).to.equal('streams[1]: expected a JSON object, got "x"');
    expect(fails({ streams: {} }).message).to.equal('streams: expected an array, got an object');
  });
});

describe('discovery.md configuration block', () => {
  it('discovery defaults: enabled, block_size 128, topic "", offsets 10000/30000, refresh 1000 ms', () => {
    const c = validateKvEventsConfig({ discovery: {} });
    expect(c.discovery).to.deep.equal({ enabled: true, blockSize: 128, topic: '', eventPortOffset: 10000, replayPortOffset: 30000, refreshIntervalMs: 1000 });
    expect(c.streams).to.deep.equal([]);
  });

  it('discovery: the discovery.md example is valid as written', () => {
    const c = validateKvEventsConfig({
      discovery: { enabled: true, block_size: 128, topic: 'xllm-kv', event_port_offset: 10000, replay_port_offset: 30000, refresh_interval_ms: 1000 },
      max_streams: 128,
      max_blocks_per_stream: 262144,
      max_message_bytes: 8388608,
      max_buffered_bytes: 16777216,
      replay_timeout_ms: 2000,
      resync_interval_ms: 30000,
    });
    expect(c.discovery).to.include({ topic: 'xllm-kv', enabled: true });
  });

  it('discovery: field bounds', () => {
    const bounds: Array<[string, number, number]> = [
      ['block_size', 1, 4096],
      ['refresh_interval_ms', 50, 60000],
      ['event_port_offset', 1, 65534],
    ];
    for (const [field, min, max] of bounds) {
      // replay offset moved out of the way so the "offsets differ" rule never fires here.
      const base = { replay_port_offset: 2 };
      expect(() => validateKvEventsConfig({ discovery: { ...base, [field]: min === 2 ? 3 : min } })).to.not.throw();
      expect(() => validateKvEventsConfig({ discovery: { ...base, [field]: max } })).to.not.throw();
      expect(fails({ discovery: { ...base, [field]: min - 1 } }).message).to.equal(`discovery.${field}: expected an integer in ${min}..${max}, got ${min - 1}`);
      expect(fails({ discovery: { ...base, [field]: max + 1 } }).path).to.equal(`discovery.${field}`);
    }
    expect(fails({ discovery: { replay_port_offset: 0 } }).path).to.equal('discovery.replay_port_offset');
    expect(fails({ discovery: { replay_port_offset: 65535 } }).path).to.equal('discovery.replay_port_offset');
    expect(fails({ discovery: { enabled: 'yes' } }).message).to.equal('discovery.enabled: expected true or false, got "yes"');
    expect(fails({ discovery: { topic: null } }).message).to.equal('discovery.topic: expected a string, got null');
    expect(validateKvEventsConfig({ discovery: { enabled: false } }).discovery?.enabled).to.equal(false);
  });

  it('discovery: event and replay offsets must differ', () => {
    expect(fails({ discovery: { event_port_offset: 5000, replay_port_offset: 5000 } }).message).to.equal(
      'discovery.replay_port_offset: expected an offset different from event_port_offset, got 5000',
    );
  });

  it('discovery: unknown fields and non-objects are errors', () => {
    expect(fails({ discovery: { block_sizes: 128 } }).message).to.match(/^discovery\.block_sizes: unknown field/);
    expect(fails({ discovery: true }).message).to.equal('discovery: expected a JSON object, got true');
  });

  it('discovery and a non-empty streams list are exclusive; an empty list is fine', () => {
    expect(fails({ discovery: {}, streams: [stream(1)] }).message).to.equal('streams: must be empty when discovery is set (the two are exclusive)');
    expect(validateKvEventsConfig({ discovery: {}, streams: [] }).discovery).to.not.equal(null);
  });
});
