// engines.md §6, the pure parts: engines-file DNS entries (strict validation naming
// engines[i].field), what each lookup outcome does to a name's set of engines (joins, leaves, the
// two-empty rule, errors keep the last good set), and how addresses become engines (naming,
// endpoints, an engine found twice kept once, a listed entry winning).
import { expect } from 'chai';
import { isConfigError } from '../../../shared/config/config-error.js';
import { parseEnginesFile, type EngineEntry } from '../../../directory-svc/engines/engines-file.js';
import type { DnsEngineEntry } from '../../../directory-svc/engines/dns-entry.js';
import { DnsNameState, type DnsOutcome, type DnsTarget } from '../../../directory-svc/engines/dns-resolution.js';
import { expandDnsEntries } from '../../../directory-svc/engines/dns-expansion.js';

const DNS = {
  dns: 'vllm-llama.inference.svc.cluster.local',
  port: 8000,
  kind: 'vllm',
  role: 'DEFAULT',
  block_size: 16,
  event_port: 5557,
  replay_port: 5567,
  topic: '',
  dp_size: 1,
};
const LISTED = { name: 'vllm-0', url: 'http://10.0.0.5:8000', kind: 'vllm', event_endpoint: 'tcp://10.0.0.5:5557', block_size: 16 };

function file(...engines: unknown[]): string {
  return JSON.stringify({ engines });
}

function errorOf(text: string): string {
  try {
    parseEnginesFile(text);
  } catch (e) {
    if (isConfigError(e)) return e.message;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

function dnsEntry(over: Record<string, unknown> = {}): DnsEngineEntry {
  return parseEnginesFile(file({ ...DNS, ...over })).dnsEntries[0]!;
}

const records = (...addresses: string[]): DnsOutcome => ({ kind: 'records', targets: addresses.map((address) => ({ address, port: null })) });
const EMPTY: DnsOutcome = { kind: 'empty', detail: 'A x: NXDOMAIN' };
const TIMEOUT: DnsOutcome = { kind: 'error', code: 'ETIMEOUT', detail: 'A x: queryA ETIMEOUT x' };
const addressesOf = (targets: readonly DnsTarget[]): string[] => targets.map((t) => t.address);

describe('engines.md §6 engines found through DNS', () => {
  describe('DNS entries in the engines file', () => {
    it("E15 the spec's DNS entry parses beside a listed one, name lower-cased and without its trailing dot", () => {
      const parsed = parseEnginesFile(file({ ...DNS, dns: 'VLLM-Llama.Inference.svc.cluster.local.' }, LISTED));
      expect(parsed.engines.map((e) => e.name)).to.deep.equal(['vllm-0']);
      expect(parsed.dnsEntries).to.deep.equal([
        { dns: 'vllm-llama.inference.svc.cluster.local', srv: false, port: 8000, kind: 'vllm', role: 'DEFAULT', blockSize: 16, models: null, eventPort: 5557, replayPort: 5567, dpSize: 1, topic: '' },
      ]);
    });

    it('E17 without event_port the engines must serve /kv_event_sources: ranks, endpoints and topic come from them', () => {
      const e = dnsEntry({ event_port: undefined, replay_port: undefined, topic: undefined, dp_size: undefined });
      expect(e).to.deep.include({ eventPort: null, replayPort: null, dpSize: 1, topic: '' });
    });

    it('E15 "srv": true takes each engine\'s port from its SRV record and refuses a port of its own', () => {
      expect(dnsEntry({ dns: '_http._tcp.vllm.fleet.test', srv: true, port: undefined })).to.deep.include({ srv: true, port: null, dns: '_http._tcp.vllm.fleet.test' });
    });

    const cases: [string, unknown, string][] = [
      ['name and dns together', { ...DNS, name: 'x' }, 'engines[0].name: a DNS entry finds its engines by name: give either name and url (one engine) or dns (every address of a name)'],
      ['url with dns', { ...DNS, url: 'http://h:1' }, 'engines[0].url: a DNS entry finds its engines by name'],
      ['unknown field', { ...DNS, weight: 1 }, 'engines[0].weight: unknown field'],
      ['dns_rank_offset is for listed entries', { ...DNS, dp_rank_offset: 2 }, 'engines[0].dp_rank_offset: unknown field'],
      ['dns not a string', { ...DNS, dns: 5 }, 'engines[0].dns: expected a DNS name (a string), got 5'],
      ['dns empty', { ...DNS, dns: '' }, 'engines[0].dns: expected a DNS name (1..253 characters), got ""'],
      ['dns an address', { ...DNS, dns: '10.0.0.5' }, 'engines[0].dns: expected a DNS name (an address is one engine: list it with name and url), got "10.0.0.5"'],
      ['dns an IPv6 address', { ...DNS, dns: 'fd00::5' }, 'engines[0].dns: expected a DNS name'],
      ['dns with a space', { ...DNS, dns: 'vllm .svc' }, 'engines[0].dns: expected a DNS name (dot-separated labels of letters, digits, - and _, each at most 63)'],
      ['dns with an empty label', { ...DNS, dns: 'a..b' }, 'engines[0].dns: expected a DNS name (dot-separated labels'],
      ['dns label of 64', { ...DNS, dns: `${'a'.repeat(64)}.test` }, 'engines[0].dns: expected a DNS name (dot-separated labels'],
      ['srv not a boolean', { ...DNS, srv: 'yes' }, 'engines[0].srv: expected true or false, got "yes"'],
      ['port missing', { ...DNS, port: undefined }, 'engines[0].port: required (the engines\' HTTP port), unless "srv": true'],
      ['port with srv', { ...DNS, srv: true }, 'engines[0].port: not with "srv": true (each SRV record gives its engine\'s port)'],
      ['port 0', { ...DNS, port: 0 }, 'engines[0].port: expected an integer in 1..65535, got 0'],
      ['port 65536', { ...DNS, port: 65536 }, 'engines[0].port: expected an integer in 1..65535, got 65536'],
      ['kind missing', { ...DNS, kind: undefined }, 'engines[0].kind: required'],
      ['bad kind', { ...DNS, kind: 'trtllm' }, 'engines[0].kind: expected one of xllm, vllm, sglang, got "trtllm"'],
      ['bad role', { ...DNS, role: 'MIX' }, 'engines[0].role: expected one of DEFAULT, PREFILL, DECODE, got "MIX"'],
      ['block_size missing', { ...DNS, block_size: undefined }, 'engines[0].block_size: required'],
      ['block_size 0', { ...DNS, block_size: 0 }, 'engines[0].block_size: expected an integer in 1..4096, got 0'],
      ['event_port 0', { ...DNS, event_port: 0 }, 'engines[0].event_port: expected an integer in 1..65535, got 0'],
      ['event_port a string', { ...DNS, event_port: '5557' }, 'engines[0].event_port: expected an integer in 1..65535, got "5557"'],
      ['replay_port without event_port', { ...DNS, event_port: undefined }, 'engines[0].replay_port: only with event_port (without it, ranks, endpoints and topic come from GET /kv_event_sources)'],
      ['dp_size without event_port', { ...DNS, event_port: undefined, replay_port: undefined }, 'engines[0].dp_size: only with event_port'],
      ['topic without event_port', { ...DNS, event_port: undefined, replay_port: undefined, dp_size: undefined }, 'engines[0].topic: only with event_port'],
      ['dp_size 0', { ...DNS, dp_size: 0 }, 'engines[0].dp_size: expected an integer in 1..1024, got 0'],
      ['ranks past 65535', { ...DNS, event_port: 65535, dp_size: 2 }, 'engines[0].event_port: port 65535 + dp_size 2 - 1 is above 65535'],
      ['replay ranks overlapping event ranks', { ...DNS, replay_port: 5558, dp_size: 2 }, 'engines[0].replay_port: ports 5558..5559 overlap the event ports 5557..5558'],
      ['event ranks on the HTTP port', { ...DNS, event_port: 7999, replay_port: undefined, dp_size: 2 }, 'engines[0].event_port: ports 7999..8000 include the HTTP port 8000'],
      ['topic not a string', { ...DNS, topic: 1 }, 'engines[0].topic: expected a string, got 1'],
    ];
    for (const [what, entry, message] of cases) {
      it(`E15 rejects ${what} naming the entry and field`, () => {
        expect(errorOf(file(LISTED, entry))).to.contain(message.replace('engines[0]', 'engines[1]'));
      });
    }
  });

  describe('a name\'s set of engines from its lookups', () => {
    it('E15 records are the set at once; an added address joins, a removed one leaves', () => {
      const s = new DnsNameState();
      expect(s.apply(records('10.0.0.2', '10.0.0.1', '10.0.0.3'))).to.deep.include({ changed: true, heldEmpty: false, newError: null });
      expect(addressesOf(s.targets)).to.deep.equal(['10.0.0.1', '10.0.0.2', '10.0.0.3']);
      expect(s.apply(records('10.0.0.3', '10.0.0.2', '10.0.0.1')).changed, 'same answer, another order').to.equal(false);
      expect(s.apply(records('10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4')).changed).to.equal(true);
      expect(s.apply(records('10.0.0.1', '10.0.0.3', '10.0.0.4')).changed).to.equal(true);
      expect(addressesOf(s.targets)).to.deep.equal(['10.0.0.1', '10.0.0.3', '10.0.0.4']);
    });

    it('E16 one empty answer does not empty the set, two consecutive ones do; records in between start over', () => {
      const s = new DnsNameState();
      s.apply(records('10.0.0.1', '10.0.0.2'));
      expect(s.apply(EMPTY)).to.deep.include({ changed: false, heldEmpty: true });
      expect(addressesOf(s.targets)).to.deep.equal(['10.0.0.1', '10.0.0.2']);
      expect(s.apply(records('10.0.0.1')).changed).to.equal(true);
      expect(s.apply(EMPTY).heldEmpty, 'the streak started over').to.equal(true);
      expect(s.apply(EMPTY)).to.deep.include({ changed: true, heldEmpty: false });
      expect(s.targets).to.deep.equal([]);
      expect(s.apply(EMPTY)).to.deep.include({ changed: false, heldEmpty: false });
    });

    it('E16 a resolver error keeps the last good set, is new once per distinct error, and neither counts towards nor breaks the two-empty rule', () => {
      const s = new DnsNameState();
      s.apply(records('10.0.0.1', '10.0.0.2'));
      expect(s.apply(TIMEOUT)).to.deep.include({ changed: false, newError: 'ETIMEOUT: A x: queryA ETIMEOUT x' });
      expect(s.apply(TIMEOUT).newError, 'the same error again').to.equal(null);
      const servfail: DnsOutcome = { kind: 'error', code: 'ESERVFAIL', detail: 'A x: queryA ESERVFAIL x' };
      expect(s.apply(servfail).newError).to.equal('ESERVFAIL: A x: queryA ESERVFAIL x');
      expect(addressesOf(s.targets)).to.deep.equal(['10.0.0.1', '10.0.0.2']);
      expect(s.apply(EMPTY)).to.deep.include({ heldEmpty: true, recovered: true });
      expect(s.apply(TIMEOUT).newError, 'a new episode is logged again').to.equal('ETIMEOUT: A x: queryA ETIMEOUT x');
      expect(addressesOf(s.targets)).to.deep.equal(['10.0.0.1', '10.0.0.2']);
      expect(s.apply(EMPTY).changed, 'the second empty answer, an error in between').to.equal(true);
      expect(s.targets).to.deep.equal([]);
    });

    it('E15 before any answer the set is empty, and a first empty answer changes nothing', () => {
      const s = new DnsNameState();
      expect(s.hasAnswered).to.equal(false);
      expect(s.apply(TIMEOUT).targets).to.deep.equal([]);
      expect(s.apply(EMPTY)).to.deep.include({ changed: false, heldEmpty: false });
      expect(s.hasAnswered).to.equal(true);
    });
  });

  describe('addresses become engines', () => {
    const at = (...addresses: string[]) => (): readonly DnsTarget[] => addresses.map((address) => ({ address, port: null }));

    it('E15 an engine per address: named <address>:<port> (IPv6 [address]:port), url http://<name>, streams on the entry\'s ports', () => {
      const listed = parseEnginesFile(file(LISTED)).engines;
      const { engines, duplicates } = expandDnsEntries(listed, [dnsEntry({ dp_size: 2, event_port: 6000, replay_port: 6100 })], at('10.0.0.7', 'fd00::7'));
      expect(duplicates).to.deep.equal([]);
      expect(engines.map((e) => e.name)).to.deep.equal(['vllm-0', '10.0.0.7:8000', '[fd00::7]:8000']);
      const v4 = engines[1]!;
      expect(v4).to.deep.equal({
        name: '10.0.0.7:8000',
        url: 'http://10.0.0.7:8000',
        kind: 'vllm',
        role: 'DEFAULT',
        dpSize: 2,
        dpRankOffset: 0,
        eventEndpoint: 'tcp://10.0.0.7:6000',
        replayEndpoint: 'tcp://10.0.0.7:6100',
        topic: '',
        blockSize: 16,
        models: null,
        dnsName: 'vllm-llama.inference.svc.cluster.local',
        eventSources: null,
      } satisfies EngineEntry);
      expect(engines[2]).to.deep.include({ url: 'http://[fd00::7]:8000', eventEndpoint: 'tcp://[fd00::7]:6000' });
    });

    it('E17 an entry without event_port gives engines with no ports of their own (their /kv_event_sources decides)', () => {
      const entry = dnsEntry({ event_port: undefined, replay_port: undefined, topic: undefined, dp_size: undefined });
      const [e] = expandDnsEntries([], [entry], at('10.0.0.7')).engines;
      expect(e).to.deep.include({ eventEndpoint: null, replayEndpoint: null, eventSources: null });
    });

    it('E15 SRV targets keep their own ports', () => {
      const entry = dnsEntry({ dns: '_http._tcp.vllm.fleet.test', srv: true, port: undefined });
      const { engines } = expandDnsEntries([], [entry], () => [{ address: '10.0.0.7', port: 8001 }, { address: '10.0.0.7', port: 8002 }]);
      expect(engines.map((e) => e.name)).to.deep.equal(['10.0.0.7:8001', '10.0.0.7:8002']);
    });

    it('E15 an engine found twice is kept once: a listed entry (same url or name) wins, then the earlier DNS entry; static stream names are never taken', () => {
      const listed = parseEnginesFile(file(LISTED, { ...LISTED, name: '10.0.0.9:8000', url: 'http://h9:8000', event_endpoint: 'tcp://h9:1' })).engines;
      const first = dnsEntry({ dns: 'a.fleet.test' });
      const second = dnsEntry({ dns: 'b.fleet.test' });
      const answers = new Map([
        ['a.fleet.test', ['10.0.0.5', '10.0.0.6', '10.0.0.9', '10.0.0.8']],
        ['b.fleet.test', ['10.0.0.6', '10.0.0.7']],
      ]);
      const { engines, duplicates } = expandDnsEntries(listed, [first, second], (e) => at(...answers.get(e.dns)!)(), new Set(['10.0.0.8:8000']));
      expect(engines.map((e) => `${e.name} ${e.dnsName ?? 'listed'}`)).to.deep.equal([
        'vllm-0 listed',
        '10.0.0.9:8000 listed',
        '10.0.0.6:8000 a.fleet.test',
        '10.0.0.7:8000 b.fleet.test',
      ]);
      expect(duplicates).to.deep.equal([
        { engine: '10.0.0.5:8000', dropped: 'a.fleet.test', keptBy: 'engines-file entry "vllm-0"' },
        { engine: '10.0.0.9:8000', dropped: 'a.fleet.test', keptBy: 'engines-file entry "10.0.0.9:8000"' },
        { engine: '10.0.0.8:8000', dropped: 'a.fleet.test', keptBy: 'a static stream' },
        { engine: '10.0.0.6:8000', dropped: 'b.fleet.test', keptBy: 'dns:a.fleet.test' },
      ]);
    });
  });
});
