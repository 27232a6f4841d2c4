// The simulated engine's command line (tools/engine-sim/engine-sim-flags.ts): discovery.md port
// arithmetic (rank r at port + offset + r) and one-line ConfigErrors for what would make the
// directory exclude the instance.
import { expect } from 'chai';
import { ConfigError } from '../../../shared/config/config-error.js';
import { ENGINE_SIM_FLAGS, engineSimHelp, parseEngineSimArgs, type EngineSimConfig } from '../../../tools/engine-sim/engine-sim-flags.js';

function cfg(argv: string[]): EngineSimConfig {
  const c = parseEngineSimArgs(argv);
  if (c === 'help') throw new Error('expected a config');
  return c;
}
function error(argv: string[]): string {
  try {
    parseEngineSimArgs(argv);
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    expect((e as Error).message).to.not.include('\n');
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('engine simulator flags (tools/engine-sim/engine-sim-flags.ts)', () => {
  it('defaults: 127.0.0.1:8000 DEFAULT, one rank, events at 18000 and snapshots at 38000, heartbeats to 127.0.0.1:8889', () => {
    const c = cfg([]);
    expect(c).to.include({ instanceName: '127.0.0.1:8000', type: 'DEFAULT', dpSize: 1, blockSize: 128, eventPortBase: 18000, replayPortBase: 38000 });
    expect(c.directoryUrl).to.equal('http://127.0.0.1:8889');
    expect(c.etcdHosts).to.deep.equal(['127.0.0.1:2379']);
    expect(c.incarnationId).to.equal(null);
  });

  it('discovery.md example: 127.0.0.1:8000 with two ranks publishes on 18000/18001 and serves snapshots on 38000/38001', () => {
    const c = cfg(['--name=127.0.0.1:8000', '--dp_size=2', '--type=prefill']);
    expect(c).to.include({ eventPortBase: 18000, replayPortBase: 38000, dpSize: 2, type: 'PREFILL' });
  });

  it('empty --etcd_addr registers nowhere and empty --directory_http sends no heartbeats; a URL is accepted', () => {
    expect(cfg(['--etcd_addr=', '--directory_http=']).etcdHosts).to.deep.equal([]);
    expect(cfg(['--directory_http=']).directoryUrl).to.equal(null);
    expect(cfg(['--directory_http=http://10.0.0.1:9000/']).directoryUrl).to.equal('http://10.0.0.1:9000');
  });

  it('engines.md §5: --engine_kind defaults to xllm, takes vllm and sglang, and --no_process_metrics drops the identity metric', () => {
    expect(cfg([])).to.include({ engineKind: 'xllm', processMetrics: true });
    expect(cfg(['--engine_kind=vllm'])).to.include({ engineKind: 'vllm', processMetrics: true });
    expect(cfg(['--engine_kind=sglang', '--no_process_metrics'])).to.include({ engineKind: 'sglang', processMetrics: false });
    expect(error(['--engine_kind=trtllm'])).to.equal('invalid --engine_kind: expected one of xllm, vllm, sglang, got "trtllm"');
  });

  it('a rank port above 65535 names the offset flag', () => {
    expect(error(['--name=127.0.0.1:35535', '--dp_size=2'])).to.equal('invalid --replay_port_offset: 35535 + 30000 + rank 1 = 65536 is above 65535');
  });

  it('overlapping event and snapshot ranges are refused', () => {
    expect(error(['--dp_size=4', '--event_port_offset=100', '--replay_port_offset=102'])).to.match(/^invalid --replay_port_offset: event ports 8100\.\. and snapshot ports 8102\.\. overlap for 4 ranks$/);
  });

  it('a name that is not one host:port, an unknown type or eviction policy, and an unknown flag are one-line errors', () => {
    expect(error(['--name=8000'])).to.equal('invalid --name: expected one host:port, got "8000"');
    expect(error(['--type=BOTH'])).to.match(/^invalid --type: expected one of DEFAULT, PREFILL, DECODE, MIX/);
    expect(error(['--eviction_policy=fifo'])).to.match(/^invalid --eviction_policy: expected one of lru/);
    expect(error(['--dp-size=2'])).to.equal('unknown flag --dp-size (did you mean --dp_size?)');
  });

  it('--help wins over a bad flag', () => {
    expect(parseEngineSimArgs(['--dp_size=0', '--help'])).to.equal('help');
  });

  it('engines.md §5 publisher modes: xllm by default; vllm/sglang take the batch form, buffer and layout', () => {
    expect(cfg([])).to.deep.include({ engineKind: 'xllm', batchForm: { encoding: 'array', omitDpRank: false, eventEncoding: 'map' }, replayBufferSteps: 10000, replayLayout: 2 });
    const v = cfg(['--engine_kind=vllm', '--batch_encoding=map', '--omit_dp_rank', '--replay_buffer_steps=5', '--replay_layout=3', '--event_encoding=array']);
    expect(v).to.deep.include({ engineKind: 'vllm', batchForm: { encoding: 'map', omitDpRank: true, eventEncoding: 'array' }, replayBufferSteps: 5, replayLayout: 3 });
    expect(cfg(['--engine_kind=sglang', '--replay_layout=none']).replayLayout).to.equal('none');
    expect(error(['--engine_kind=trtllm'])).to.match(/^invalid --engine_kind: /);
    expect(error(['--replay_buffer_steps=0'])).to.match(/^invalid --replay_buffer_steps: /);
  });

  it('cache-identity §6 --served_models: base then adapters, strict; empty = lenient "sim"; empty or repeated names refused', () => {
    expect(cfg([]).servedModels).to.deep.equal({ names: ['sim'], strict: false });
    expect(cfg(['--served_models=llama-3.1-8b, sql-lora ,chat-lora']).servedModels).to.deep.equal({ names: ['llama-3.1-8b', 'sql-lora', 'chat-lora'], strict: true });
    expect(error(['--served_models=a,,b'])).to.equal('invalid --served_models: expected base[,adapter...] of distinct non-empty names, entry 1 is empty in "a,,b"');
    expect(error(['--served_models=a,b,a'])).to.equal('invalid --served_models: expected base[,adapter...] of distinct non-empty names, "a" is listed twice in "a,b,a"');
  });

  it('cache-identity §6 --hybrid_sliding_window: tokens, 0 = off, only for --engine_kind=vllm; --event_encoding map or array', () => {
    expect(cfg([]).hybridSlidingWindow).to.equal(0);
    expect(cfg(['--engine_kind=vllm', '--hybrid_sliding_window=64']).hybridSlidingWindow).to.equal(64);
    expect(error(['--hybrid_sliding_window=64'])).to.equal('invalid --hybrid_sliding_window: KV cache groups are published only by --engine_kind=vllm, got xllm');
    expect(error(['--engine_kind=vllm', '--hybrid_sliding_window=-1'])).to.match(/^invalid --hybrid_sliding_window: expected an integer in 0\.\.16777216/);
    expect(error(['--event_encoding=tuple'])).to.equal('invalid --event_encoding: expected one of map, array, got "tuple"');
  });

  it('--help names every flag, the identity flags included', () => {
    const help = engineSimHelp();
    for (const flag of Object.keys(ENGINE_SIM_FLAGS)) expect(help).to.include(`--${flag}`);
    expect(help).to.include('--served_models=<base[,adapter...]>');
    expect(help).to.include('--hybrid_sliding_window');
    expect(help).to.include('--event_encoding');
  });

  it('E15 --host binds (and names) the engine at a given IPv4 address, --name keeping the port; nothing unconnectable', () => {
    expect(cfg(['--host=127.0.0.7', '--name=127.0.0.1:8100'])).to.include({ host: '127.0.0.7', instanceName: '127.0.0.7:8100', httpPort: 8100, eventPortBase: 18100 });
    expect(cfg([])).to.include({ host: '127.0.0.1', kvEventSources: true });
    for (const bad of ['0.0.0.0', 'localhost', '::1', '127.0.0']) {
      expect(error([`--host=${bad}`])).to.equal(`invalid --host: expected an IPv4 address such as 127.0.0.2 (not 0.0.0.0), got ${JSON.stringify(bad)}`);
    }
  });

  it('E17 --no_kv_event_sources turns GET /kv_event_sources off', () => {
    expect(cfg(['--engine_kind=vllm', '--no_kv_event_sources']).kvEventSources).to.equal(false);
  });
});
