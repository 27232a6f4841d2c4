// discovery.md "etcd keys": namespace normalisation, key layout and instance JSON validation.
import { expect } from 'chai';
import {
  discoveryPrefix,
  normalizeNamespace,
  parseDiscoveryKey,
  parseInstanceValue,
} from '../../../directory-svc/discovery/instance-json.js';
import { errorClass } from './discovery-fixtures.js';

const base = { name: '10.0.0.5:8000', rpc_address: '10.0.0.5:9000', type: 1 };

describe('discovery.md etcd keys', () => {
  it('namespace "ns" gives /ns/, slashes are trimmed then added, empty gives no prefix', () => {
    expect(normalizeNamespace('ns')).to.equal('/ns/');
    expect(normalizeNamespace('/ns/')).to.equal('/ns/');
    expect(normalizeNamespace('//a/b//')).to.equal('/a/b/');
    expect(normalizeNamespace('')).to.equal('');
    expect(normalizeNamespace('/')).to.equal('');
    expect(discoveryPrefix('ns')).to.equal('/ns/XLLM:');
    expect(discoveryPrefix('')).to.equal('XLLM:');
  });

  it('instance keys carry the type and a host:port name; LOADMETRICS keys are recognised', () => {
    expect(parseDiscoveryKey('XLLM:PREFILL:10.0.0.5:8000')).to.deep.equal({ kind: 'instance', type: 'PREFILL', name: '10.0.0.5:8000' });
    expect(parseDiscoveryKey('XLLM:MIX:[::1]:8000')).to.deep.equal({ kind: 'instance', type: 'MIX', name: '[::1]:8000' });
    expect(parseDiscoveryKey('XLLM:LOADMETRICS:host-a:8000')).to.deep.equal({ kind: 'load_metrics', name: 'host-a:8000' });
  });

  it('unknown type segments, missing names and names that are not host:port are bad keys', () => {
    for (const k of ['XLLM:CACHE:10.0.0.5:8000', 'XLLM:PREFILL:', 'XLLM:PREFILL:nohost', 'XLLM:PREFILL:h:99999', 'XLLM:PREFILL:h/x:80', 'OTHER:PREFILL:h:1']) {
      expect(errorClass(() => parseDiscoveryKey(k)), k).to.equal('bad_key');
    }
  });

  it('a minimal value gets the defaults: dp_size 1, backend xllm, no identity fields', () => {
    const reg = parseInstanceValue('PREFILL', '10.0.0.5:8000', JSON.stringify(base));
    expect(reg).to.deep.include({ name: '10.0.0.5:8000', type: 'PREFILL', rpcAddress: '10.0.0.5:9000', dpSize: 1, backendType: 'xllm', incarnationId: null, registerTsMs: null });
  });

  it('the key suffix overrides the name field; unknown fields are ignored', () => {
    const reg = parseInstanceValue('PREFILL', '10.0.0.6:8000', JSON.stringify({ ...base, name: 'other:1', extra: { x: 1 } }));
    expect(reg.name).to.equal('10.0.0.6:8000');
  });

  it('dp_size 0 means 1; optional fields are read', () => {
    const reg = parseInstanceValue(
      'MIX',
      'h:8000',
      JSON.stringify({
        ...base,
        type: 3,
        dp_size: 0,
        incarnation_id: 'a1b2',
        register_ts_ms: 1700000000000,
        ttft_profiling_data: [[128, 35]],
        tpot_profiling_data: [[4, 512, 9]],
        backend_type: 'vllm',
      }),
    );
    expect(reg).to.deep.include({ type: 'MIX', dpSize: 1, incarnationId: 'a1b2', registerTsMs: 1700000000000, backendType: 'vllm' });
    expect(reg.ttftProfile).to.deep.equal([[128, 35]]);
    expect(reg.tpotProfile).to.deep.equal([[4, 512, 9]]);
  });

  it('a value that is not JSON, lacks a required field or has a bad type is rejected for that key', () => {
    const bad: string[] = [
      'not json',
      '[1,2]',
      JSON.stringify({ rpc_address: 'x', type: 1 }),
      JSON.stringify({ name: 'x', type: 1 }),
      JSON.stringify({ name: 'x', rpc_address: 'x' }),
      JSON.stringify({ ...base, type: 4 }),
      JSON.stringify({ ...base, type: '1' }),
      JSON.stringify({ ...base, type: 2 }), // DECODE value under a PREFILL key
      JSON.stringify({ ...base, dp_size: -1 }),
      JSON.stringify({ ...base, dp_size: 1.5 }),
      JSON.stringify({ ...base, incarnation_id: 7 }),
      JSON.stringify({ ...base, register_ts_ms: 'now' }),
      JSON.stringify({ ...base, ttft_profiling_data: [[1, 2, 3]] }),
      JSON.stringify({ ...base, tpot_profiling_data: [[1, 2]] }),
      JSON.stringify({ ...base, backend_type: 1 }),
    ];
    for (const text of bad) expect(errorClass(() => parseInstanceValue('PREFILL', 'h:8000', text)), text).to.equal('invalid_instance');
  });
});
