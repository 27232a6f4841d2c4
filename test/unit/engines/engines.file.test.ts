// engines.md §4: the engines file's strict validation (every error names the entry index and
// field), and how its entries become instances and streams in discovery's shared table and plan.
import { expect } from 'chai';
import { isConfigError } from '../../../shared/config/config-error.js';
import type { DiscoveryConfig } from '../../../shared/config/kv-events-config.js';
import { parseInstanceValue } from '../../../directory-svc/discovery/instance-json.js';
import { InstanceTable } from '../../../directory-svc/discovery/instance-table.js';
import { planStreams } from '../../../directory-svc/discovery/stream-planner.js';
import { parseEnginesFile, type EngineEntry } from '../../../directory-svc/engines/engines-file.js';
import type { EngineIdentitySource } from '../../../directory-svc/engines/engine-identity.js';

const VLLM = {
  name: 'vllm-0',
  url: 'http://10.0.0.5:8000',
  kind: 'vllm',
  role: 'DEFAULT',
  dp_size: 2,
  event_endpoint: 'tcp://10.0.0.5:5557',
  replay_endpoint: 'tcp://10.0.0.5:5567',
  topic: '',
  block_size: 16,
};

function file(...engines: unknown[]): string {
  return JSON.stringify({ engines });
}

function errorOf(text: string, reserved?: string[]): string {
  try {
    parseEnginesFile(text, reserved === undefined ? {} : { reservedNames: new Set(reserved) });
  } catch (e) {
    if (isConfigError(e)) return e.message;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

function entry(over: Record<string, unknown> = {}): EngineEntry {
  return parseEnginesFile(file({ ...VLLM, ...over })).engines[0]!;
}

const table = (): InstanceTable => new InstanceTable({ leaseLostHeartbeatTimeoutMs: 3000, detectDisconnectedIntervalMs: 15000 });
const LOAD = { waitingRequests: 1, gpuCacheUsage: 0.5, recentMaxTtftMs: null, recentMaxTbtMs: null };
const ETCD: DiscoveryConfig = { enabled: true, blockSize: 128, topic: '', eventPortOffset: 10000, replayPortOffset: 30000, refreshIntervalMs: 1000 };

describe('engines.md §4 the engines file', () => {
  describe('validation', () => {
    it('E11 an entry parses with its defaults filled in', () => {
      const [e] = parseEnginesFile(file({ name: 'sg-0', url: 'http://h:30000/', kind: 'sglang', event_endpoint: 'tcp://h:5557', block_size: 64 })).engines;
      expect(e).to.deep.equal({
        name: 'sg-0',
        url: 'http://h:30000',
        kind: 'sglang',
        role: 'DEFAULT',
        dpSize: 1,
        dpRankOffset: 0,
        eventEndpoint: 'tcp://h:5557',
        replayEndpoint: null,
        topic: '',
        blockSize: 64,
        models: null,
        dnsName: null,
        eventSources: null,
      });
      expect(parseEnginesFile(file(VLLM)).engines[0]).to.deep.include({ dpSize: 2, replayEndpoint: 'tcp://10.0.0.5:5567' });
    });

    it("E11 the spec's DP=2 example on 5557/5558 is refused: rank 1's events would be rank 0's replay port (vLLM could not bind both)", () => {
      expect(errorOf(file({ ...VLLM, replay_endpoint: 'tcp://10.0.0.5:5558' }))).to.equal(
        'engines[0].event_endpoint: tcp://10.0.0.5:5558 (engines[0] rank 1 events) is already used by engines[0] rank 0 replay',
      );
    });

    const cases: [string, string, string][] = [
      ['unknown field', file({ ...VLLM, weight: 2 }), 'engines[0].weight: unknown field'],
      ['unknown top-level field', JSON.stringify({ engines: [], extra: 1 }), 'extra: unknown field'],
      ['missing engines', '{}', 'engines: required'],
      ['not JSON', '{"engines": [', 'not valid JSON'],
      ['duplicate name', file(VLLM, { ...VLLM, event_endpoint: 'tcp://h:7000', replay_endpoint: 'tcp://h:7100' }), 'engines[1].name: "vllm-0" already used by engines[0]'],
      ['empty name', file({ ...VLLM, name: '' }), 'engines[0].name: expected a non-empty string'],
      ['url not http', file({ ...VLLM, url: 'https://h:8000' }), 'engines[0].url: expected http://host:port[/path] (scheme must be http)'],
      ['url without port', file({ ...VLLM, url: 'http://h' }), 'engines[0].url: expected http://host:port[/path] (an explicit port)'],
      ['url missing', file({ ...VLLM, url: undefined }), 'engines[0].url: required'],
      ['bad kind', file({ ...VLLM, kind: 'trtllm' }), 'engines[0].kind: expected one of xllm, vllm, sglang, got "trtllm"'],
      ['bad role', file({ ...VLLM, role: 'MIX' }), 'engines[0].role: expected one of DEFAULT, PREFILL, DECODE, got "MIX"'],
      ['dp_size 0', file({ ...VLLM, dp_size: 0 }), 'engines[0].dp_size: expected an integer in 1..1024, got 0'],
      ['dp_size 1025', file({ ...VLLM, dp_size: 1025 }), 'engines[0].dp_size: expected an integer in 1..1024, got 1025'],
      ['wildcard endpoint', file({ ...VLLM, event_endpoint: 'tcp://*:5557' }), 'engines[0].event_endpoint: expected a connectable tcp://host:port'],
      ['ranks past 65535', file({ ...VLLM, event_endpoint: 'tcp://h:65535' }), 'engines[0].event_endpoint: port 65535 + dp_size 2 - 1 is above 65535'],
      ['block_size missing', file({ ...VLLM, block_size: undefined }), 'engines[0].block_size: required'],
      ['topic not a string', file({ ...VLLM, topic: 3 }), 'engines[0].topic: expected a string, got 3'],
      ['dp_rank_offset too large', file({ ...VLLM, dp_rank_offset: 1023 }), 'engines[0].dp_rank_offset: dp_rank_offset 1023 + dp_size 2 gives ranks above 1023'],
      ['endpoint shared across entries', file({ ...VLLM, dp_size: 1 }, { ...VLLM, name: 'vllm-1', dp_size: 1, replay_endpoint: 'tcp://h:1' }), 'engines[1].event_endpoint: tcp://10.0.0.5:5557 (engines[1] rank 0 events) is already used by engines[0] rank 0 events'],
    ];
    for (const [what, text, message] of cases) {
      it(`E11 rejects ${what} naming the entry and field`, () => {
        expect(errorOf(text)).to.contain(message);
      });
    }

    it("E11 a name used by a static stream is refused (engines.md §4: never the same instance name twice)", () => {
      expect(errorOf(file({ ...VLLM, dp_size: 1 }), ['vllm-0'])).to.equal('engines[0].name: "vllm-0" is a static stream\'s instance_name');
    });
  });

  describe('instances and streams', () => {
    it('E11 an admitted engine is an ACTIVE instance with its role, dp_size, kind and url, and the identity as incarnation', () => {
      const t = table();
      const res = t.putEngine(entry(), '1700000000.5', 10);
      expect(res.refused).to.equal(null);
      const v = t.get('vllm-0')!;
      expect(v).to.deep.include({ source: 'engines_file', state: 'ACTIVE', routingCandidate: false });
      expect(v.registration).to.deep.include({ type: 'DEFAULT', dpSize: 2, backendType: 'vllm', incarnationId: '1700000000.5' });
      expect(v.engine?.url).to.equal('http://10.0.0.5:8000');
      t.engineLoad('vllm-0', LOAD, 11);
      expect(t.get('vllm-0')!.routingCandidate).to.equal(true);
    });

    it('E11 rank r gets dp_rank offset + r on the entry ports + r, with the kind and identity source in its config', () => {
      const t = table();
      t.putEngine(entry({ dp_rank_offset: 4, topic: 'kv' }), null, 0);
      const source: EngineIdentitySource = { current: () => null, scrapeNow: async () => null };
      const plan = planStreams(t.instances(), null, 128, (name) => (name === 'vllm-0' ? source : undefined));
      expect(plan.exclusions).to.deep.equal([]);
      expect(plan.streams.map((s) => [s.dpRank, s.endpoint, s.replayEndpoint, s.blockSize, s.topic, s.engineKind])).to.deep.equal([
        [4, 'tcp://10.0.0.5:5557', 'tcp://10.0.0.5:5567', 16, 'kv', 'vllm'],
        [5, 'tcp://10.0.0.5:5558', 'tcp://10.0.0.5:5568', 16, 'kv', 'vllm'],
      ]);
      expect(plan.streams[0]!.identity).to.equal(source);
    });

    it('E11 no replay endpoint plans streams with an empty replay endpoint', () => {
      const t = table();
      t.putEngine(entry({ replay_endpoint: undefined, dp_size: 1 }), null, 0);
      expect(planStreams(t.instances(), null, 128).streams.map((s) => s.replayEndpoint)).to.deep.equal(['']);
    });

    it('E11 a changed entry keeps the generation; changed endpoints change the stream plan key', () => {
      const t = table();
      t.putEngine(entry(), 'a', 0);
      const before = planStreams(t.instances(), null, 128).streams.map((s) => s.planKey);
      const g = t.get('vllm-0')!.generation;
      expect(t.putEngine(entry(), 'a', 1).changes).to.deep.equal([]);
      const changed = t.putEngine(entry({ event_endpoint: 'tcp://10.0.0.6:5557' }), 'a', 2);
      expect(changed.changes.map((c) => c.kind)).to.deep.equal(['upsert']);
      expect(t.get('vllm-0')!.generation).to.equal(g);
      expect(planStreams(t.instances(), null, 128).streams.map((s) => s.planKey)).to.not.deep.equal(before);
    });

    it('E12 a changed identity is a replacement: new generation, no load, new stream plan keys', () => {
      const t = table();
      t.putEngine(entry(), '1700000000.5', 0);
      t.engineLoad('vllm-0', LOAD, 1);
      const before = planStreams(t.instances(), null, 128).streams.map((s) => s.planKey);
      const g = t.get('vllm-0')!.generation;
      const res = t.putEngine(entry(), '1700000100.25', 2);
      expect(res.changes.map((c) => c.kind)).to.deep.equal(['replace']);
      const v = t.get('vllm-0')!;
      expect(v.generation).to.not.equal(g);
      expect(v.load).to.equal(null);
      const after = planStreams(t.instances(), null, 128).streams.map((s) => s.planKey);
      expect(after.some((k) => before.includes(k))).to.equal(false);
    });

    it('E11 SUSPECT keeps the streams but is no candidate; healthy again is ACTIVE; a DECODE engine is never subscribed', () => {
      const t = table();
      t.putEngine(entry(), null, 0);
      t.putEngine(entry({ name: 'dec', role: 'DECODE', event_endpoint: 'tcp://d:1', replay_endpoint: 'tcp://d:100' }), null, 0);
      t.engineLoad('vllm-0', LOAD, 0);
      expect(t.engineHealth('vllm-0', false, 1).map((c) => (c.kind === 'state' ? `${c.from}>${c.to}` : c.kind))).to.deep.equal(['ACTIVE>SUSPECT']);
      expect(t.get('vllm-0')!.routingCandidate).to.equal(false);
      expect(planStreams(t.instances(), null, 128).streams.map((s) => `${s.instanceName}/${s.dpRank}`)).to.deep.equal(['vllm-0/0', 'vllm-0/1']);
      expect(t.tick(1_000_000)).to.deep.equal([]); // only leaving the file removes it
      t.engineHealth('vllm-0', true, 2);
      expect(t.get('vllm-0')!).to.deep.include({ state: 'ACTIVE', routingCandidate: true });
    });

    it('E11 removal from the file removes the instance; a heartbeat never speaks for an engines-file instance', () => {
      const t = table();
      t.putEngine(entry(), null, 0);
      expect(t.heartbeat({ name: 'vllm-0', incarnationId: null, currentRole: null, load: LOAD }, 1).outcome).to.equal('unknown_instance');
      expect(t.removeEngine('vllm-0').map((c) => c.kind)).to.deep.equal(['remove']);
      expect(t.get('vllm-0')).to.equal(null);
    });

    it('E11 etcd wins a shared name: the file entry is refused while etcd holds it, and an etcd PUT replaces a file instance', () => {
      const t = table();
      const name = '10.0.0.5:8000';
      t.putEngine(entry({ name }), null, 0);
      const put = t.put(parseInstanceValue('DEFAULT', name, JSON.stringify({ name, rpc_address: 'r:1', type: 0, incarnation_id: 'x' })), 1);
      expect(put.changes.map((c) => c.kind)).to.deep.equal(['replace']);
      expect(t.get(name)!.source).to.equal('etcd');
      expect(t.putEngine(entry({ name }), null, 2)).to.deep.equal({ changes: [], refused: 'name_held_by_etcd' });
    });

    it('E11 max_streams spans etcd and engines-file instances: whole instances in name order', () => {
      const t = table();
      t.put(parseInstanceValue('DEFAULT', 'a:1000', JSON.stringify({ name: 'a:1000', rpc_address: 'r:1', type: 0 })), 0);
      t.putEngine(entry(), null, 0); // vllm-0: 2 streams
      t.putEngine(entry({ name: 'b-engine', dp_size: 1, event_endpoint: 'tcp://b:1', replay_endpoint: 'tcp://b:2' }), null, 0);
      const plan = planStreams(t.instances(), ETCD, 2);
      expect(plan.streams.map((s) => s.instanceName)).to.deep.equal(['a:1000', 'b-engine']);
      expect(plan.exclusions.map((e) => [e.class, e.instances])).to.deep.equal([['max_streams', ['vllm-0']]]);
    });
  });
});
