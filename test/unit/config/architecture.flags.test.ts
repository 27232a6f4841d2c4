// architecture.md "Processes and flags": the generic parser and both services' flag tables.
// Pure: argv in, frozen object or one-line ConfigError out.
import { expect } from 'chai';
import { ConfigError } from '../../../shared/config/config-error.js';
import { parseFlags, flagsHelp, parseHostPortList, type FlagTable } from '../../../shared/config/flags.js';
import { parseDirectoryFlags, directoryHelp, DIRECTORY_FLAGS, type DirectoryFlags } from '../../../shared/config/directory-flags.js';
import { parseRouterFlags, routerHelp, ROUTER_FLAGS, type RouterFlags } from '../../../shared/config/router-flags.js';
import { META_FLAGS, metaHelp, parseMetaFlags, type MetaFlags } from '../../../shared/config/meta-flags.js';

function dir(argv: string[], env: Record<string, string> = {}): DirectoryFlags {
  const p = parseDirectoryFlags(argv, env);
  if (p.kind !== 'flags') throw new Error('expected flags');
  return p.flags;
}
function router(argv: string[]): RouterFlags {
  const p = parseRouterFlags(argv);
  if (p.kind !== 'flags') throw new Error('expected flags');
  return p.flags;
}
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    const ce = e as ConfigError;
    expect(ce.class).to.equal('config');
    expect(ce.message).to.not.include('\n');
    return ce;
  }
  throw new Error('expected a ConfigError');
}

describe('architecture.md flags: generic parser', () => {
  const table = {
    n: { type: 'int', default: 5, min: 1, max: 10, help: 'n' },
    opt_n: { type: 'int', default: null, min: 0, max: 10, help: 'optional n' },
    x: { type: 'float', default: 0.5, min: 0, max: 1, help: 'x' },
    b: { type: 'bool', default: false, help: 'b' },
    s: { type: 'string', default: 'd', help: 's' },
    e: { type: 'enum', values: ['A', 'B_C'], default: 'A', help: 'e' },
    addrs: { type: 'host-port-list', default: '127.0.0.1:1', help: 'addrs' },
    with_env: { type: 'string', default: '', env: 'SOME_ENV', help: 'env fallback' },
  } as const satisfies FlagTable;

  it('flags: defaults fill every absent flag and the result is frozen with camelCase keys', () => {
    const p = parseFlags(table, []);
    if (p.kind !== 'flags') throw new Error('help');
    expect(p.flags).to.deep.equal({ n: 5, optN: null, x: 0.5, b: false, s: 'd', e: 'A', addrs: [{ host: '127.0.0.1', port: 1 }], withEnv: '' });
    expect(Object.isFrozen(p.flags)).to.equal(true);
  });

  it('flags: --name=value, --name value and bare --bool all parse', () => {
    const p = parseFlags(table, ['--n=7', '--x', '0.25', '--b', '--s=', '--e', 'b_c', '--addrs=a.example:80,[::1]:90']);
    if (p.kind !== 'flags') throw new Error('help');
    expect(p.flags.n).to.equal(7);
    expect(p.flags.x).to.equal(0.25);
    expect(p.flags.b).to.equal(true);
    expect(p.flags.s).to.equal('');
    expect(p.flags.e).to.equal('B_C'); // case-insensitive, normalized to the table's spelling
    expect(p.flags.addrs).to.deep.equal([
      { host: 'a.example', port: 80 },
      { host: '[::1]', port: 90 },
    ]);
  });

  it('flags: --bool=false and --bool=true; a bare bool never swallows the next argument', () => {
    const p = parseFlags(table, ['--b=false']);
    expect(p.kind === 'flags' && p.flags.b).to.equal(false);
    const q = parseFlags(table, ['--b', '--n=2']);
    expect(q.kind === 'flags' && q.flags.b && q.flags.n).to.equal(2);
    expect(configError(() => parseFlags(table, ['--b=maybe'])).message).to.equal('invalid --b: expected true or false, got "maybe"');
  });

  it('flags: `given` names exactly the flags set on the command line', () => {
    const p = parseFlags(table, ['--n=7', '--b', '--s', 'v'], { SOME_ENV: 'x' });
    expect(p.kind === 'flags' && [...p.given].sort()).to.deep.equal(['b', 'n', 's']);
  });

  it('flags: an env fallback is used only when the flag is absent', () => {
    const a = parseFlags(table, [], { SOME_ENV: '/from/env' });
    expect(a.kind === 'flags' && a.flags.withEnv).to.equal('/from/env');
    const b = parseFlags(table, ['--with_env=/from/flag'], { SOME_ENV: '/from/env' });
    expect(b.kind === 'flags' && b.flags.withEnv).to.equal('/from/flag');
  });

  it('flags: --help or -h anywhere asks for help, even beside bad flags', () => {
    expect(parseFlags(table, ['--nope', '--help']).kind).to.equal('help');
    expect(parseFlags(table, ['-h']).kind).to.equal('help');
  });

  it('flags: unknown flag, with a hint for dashes', () => {
    expect(configError(() => parseFlags(table, ['--zzz=1'])).message).to.equal('unknown flag --zzz (see --help)');
    const e = configError(() => parseFlags(table, ['--opt-n=1']));
    expect(e.message).to.equal('unknown flag --opt-n (did you mean --opt_n?)');
    expect(e.path).to.equal('--opt-n');
  });

  it('flags: positional arguments, single dashes and a flag given twice are errors', () => {
    expect(configError(() => parseFlags(table, ['extra'])).message).to.match(/^unexpected argument "extra"/);
    expect(configError(() => parseFlags(table, ['-n=1'])).message).to.match(/^unexpected argument "-n=1"/);
    expect(configError(() => parseFlags(table, ['--n=1', '--n=2'])).message).to.equal('invalid --n: given more than once');
  });

  it('flags: missing value names the flag', () => {
    expect(configError(() => parseFlags(table, ['--n'])).message).to.equal('invalid --n: expected an integer in 1..10, got no value');
    expect(configError(() => parseFlags(table, ['--s', '--b'])).message).to.equal('invalid --s: expected a value, got no value');
  });

  it('flags: int bounds and syntax', () => {
    for (const bad of ['0', '11', 'abc', '1.5', '1e1', '', ' 3', '0x5']) {
      const e = configError(() => parseFlags(table, [`--n=${bad}`]));
      expect(e.message).to.equal(`invalid --n: expected an integer in 1..10, got ${JSON.stringify(bad)}`);
      expect(e.path).to.equal('--n');
    }
    for (const ok of [1, 10]) {
      const p = parseFlags(table, [`--n=${ok}`]);
      expect(p.kind === 'flags' && p.flags.n).to.equal(ok);
    }
  });

  it('flags: float bounds and syntax', () => {
    for (const bad of ['-0.1', '1.01', 'NaN', 'Infinity', 'x', '']) {
      expect(configError(() => parseFlags(table, [`--x=${bad}`])).message).to.equal(`invalid --x: expected a number in [0, 1], got ${JSON.stringify(bad)}`);
    }
    for (const [ok, v] of [['0', 0], ['1', 1], ['.5', 0.5], ['1e-1', 0.1]] as const) {
      const p = parseFlags(table, [`--x=${ok}`]);
      expect(p.kind === 'flags' && p.flags.x).to.equal(v);
    }
  });

  it('flags: enum lists the allowed values', () => {
    expect(configError(() => parseFlags(table, ['--e=Z'])).message).to.equal('invalid --e: expected one of A, B_C, got "Z"');
  });

  it('flags: host:port lists reject empty hosts, bad ports and junk', () => {
    for (const bad of ['', 'host', ':80', 'h:0', 'h:65536', 'h:-1', 'h:80,', 'h a:80', 'http://h:80', 'h:80x']) {
      expect(configError(() => parseFlags(table, [`--addrs=${bad}`])).message).to.equal(
        `invalid --addrs: expected host:port[,host:port...] with ports in 1..65535, got ${JSON.stringify(bad)}`,
      );
    }
    expect(parseHostPortList('h:65535,10.0.0.1:1')).to.deep.equal([
      { host: 'h', port: 65535 },
      { host: '10.0.0.1', port: 1 },
    ]);
  });

  it('flags: help text lists every flag with its default and help line', () => {
    const text = flagsHelp('Usage: x', table);
    expect(text.startsWith('Usage: x\n')).to.equal(true);
    for (const name of Object.keys(table)) expect(text).to.include(`--${name}=`);
    expect(text).to.include('default: 5');
    expect(text).to.include('default: unset');
    expect(text).to.include('env SOME_ENV when absent');
  });
});

describe('architecture.md flags: directory-svc table', () => {
  it('directory: every default of architecture.md "Processes and flags"', () => {
    const f = dir([]);
    expect(f).to.deep.equal({
      etcdAddr: [{ host: '127.0.0.1', port: 2379 }],
      etcdNamespace: '',
      kvEventsConfigFile: '',
      enginesFile: '',
      enginesRefreshIntervalMs: 1000,
      enginesModelsRefreshMs: 10000,
      enginesDnsRefreshMs: 5000,
      enginesDnsServer: '',
      grpcPort: 50051,
      httpPort: 8889,
      internalApiToken: '',
      grpcTlsCert: '',
      grpcTlsKey: '',
      grpcTlsCa: '',
      leaseLostHeartbeatTimeoutMs: 3000,
      detectDisconnectedInstanceIntervalS: 15,
      instanceDeleteProbeTimeoutMs: 1000,
      instanceDeleteProbeAttempts: 2,
      logLevel: 'info',
    });
  });

  it('directory: the spec example error for --grpc_port', () => {
    const e = configError(() => dir(['--grpc_port=abc']));
    expect(e.message).to.equal('invalid --grpc_port: expected an integer in 1..65535, got "abc"');
  });

  it('directory: port bounds', () => {
    for (const flag of ['grpc_port', 'http_port']) {
      configError(() => dir([`--${flag}=0`]));
      configError(() => dir([`--${flag}=65536`]));
    }
    expect(dir(['--grpc_port=1', '--http_port=65535']).grpcPort).to.equal(1);
  });

  it('directory: the listening ports must differ', () => {
    expect(configError(() => dir(['--grpc_port=9000', '--http_port=9000'])).message).to.equal('invalid --http_port: 9000 is also --grpc_port');
  });

  it('directory: the former --meta_* flags name meta-svc and the flag that replaced each', () => {
    expect(configError(() => dir(['--meta_http_port=0'])).message).to.equal('--meta_http_port moved to meta-svc: run node dist/meta-svc/main.js --http_port=0');
    expect(configError(() => dir(['--meta_db', 'x.db'])).message).to.equal('--meta_db moved to meta-svc: run node dist/meta-svc/main.js --meta_store=sqlite:x.db');
    expect(configError(() => dir(['--meta_config_file=/x.json'])).path).to.equal('--meta_config_file');
    // The env fallback belongs to meta-svc now; the directory ignores it.
    expect(() => dir([], { KVCM_META_CONFIG_FILE: '/etc/kvcm.json' })).to.not.throw();
  });

  it('directory: lifecycle flag bounds', () => {
    const bounds: Array<[string, number, number]> = [
      ['lease_lost_heartbeat_timeout_ms', 100, 600000],
      ['detect_disconnected_instance_interval', 1, 86400],
      ['instance_delete_probe_timeout_ms', 10, 60000],
      ['instance_delete_probe_attempts', 1, 10],
      // engines.md §4.1
      ['engines_refresh_interval_ms', 50, 60000],
      // cache-identity §1
      ['engines_models_refresh_ms', 1000, 600000],
      // engines.md §6
      ['engines_dns_refresh_ms', 1000, 600000],
    ];
    for (const [flag, min, max] of bounds) {
      expect(() => dir([`--${flag}=${min}`])).to.not.throw();
      expect(() => dir([`--${flag}=${max}`])).to.not.throw();
      expect(configError(() => dir([`--${flag}=${min - 1}`])).message).to.equal(`invalid --${flag}: expected an integer in ${min}..${max}, got "${min - 1}"`);
      configError(() => dir([`--${flag}=${max + 1}`]));
    }
  });

  it('directory: --engines_file defaults to none and --engines_refresh_interval_ms to 1000 (engines.md §4)', () => {
    expect(dir([])).to.deep.include({ enginesFile: '', enginesRefreshIntervalMs: 1000 });
    expect(dir(['--engines_file=/etc/engines.json']).enginesFile).to.equal('/etc/engines.json');
  });

  it('directory: --engines_models_refresh_ms defaults to 10000 and is shown in --help (cache-identity §1)', () => {
    expect(dir([]).enginesModelsRefreshMs).to.equal(10000);
    expect(dir(['--engines_models_refresh_ms=2500']).enginesModelsRefreshMs).to.equal(2500);
    expect(configError(() => dir(['--engines_models_refresh_ms=999'])).message).to.equal('invalid --engines_models_refresh_ms: expected an integer in 1000..600000, got "999"');
    expect(directoryHelp()).to.match(/--engines_models_refresh_ms=<int 1000..600000>\n.*GET \/v1\/models period.*\(default: 10000\)/);
  });

  it('E18 directory: --etcd_addr= (empty) is no etcd at all; a bad list is still an error naming the empty form', () => {
    expect(dir(['--etcd_addr=']).etcdAddr).to.deep.equal([]);
    expect(dir(['--etcd_addr', '']).etcdAddr).to.deep.equal([]);
    expect(configError(() => dir(['--etcd_addr=a'])).message).to.equal(
      'invalid --etcd_addr: expected host:port[,host:port...] with ports in 1..65535, or empty for none, got "a"',
    );
  });

  it('E15 directory: --engines_dns_server takes ip:port or [ipv6]:port, nothing a resolver would itself have to resolve', () => {
    expect(dir([]).enginesDnsServer).to.equal('');
    expect(dir(['--engines_dns_server=127.0.0.1:5353']).enginesDnsServer).to.equal('127.0.0.1:5353');
    expect(dir(['--engines_dns_server=[::1]:53']).enginesDnsServer).to.equal('[::1]:53');
    for (const bad of ['dns.local:53', '127.0.0.1', '127.0.0.1:0', '127.0.0.1:65536', '::1:53', '[127.0.0.1]:53', '[::1]']) {
      expect(configError(() => dir([`--engines_dns_server=${bad}`])).message, bad).to.equal(
        `invalid --engines_dns_server: expected ip:port or [ipv6]:port with a port in 1..65535, got ${JSON.stringify(bad)}`,
      );
    }
  });

  it('directory: --etcd_addr list, --log_level enum', () => {
    expect(dir(['--etcd_addr=a:1,b:2']).etcdAddr).to.deep.equal([
      { host: 'a', port: 1 },
      { host: 'b', port: 2 },
    ]);
    configError(() => dir(['--etcd_addr=a']));
    expect(dir(['--log_level=debug']).logLevel).to.equal('debug');
    expect(configError(() => dir(['--log_level=loud'])).message).to.equal('invalid --log_level: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"');
  });

  it('directory: --help text names every flag', () => {
    const text = directoryHelp();
    expect(text).to.match(/^Usage: node dist\/directory-svc\/main\.js/);
    for (const name of Object.keys(DIRECTORY_FLAGS)) expect(text).to.include(`--${name}=`);
  });
});

describe('architecture.md flags: router-svc table', () => {
  it('router: every default', () => {
    expect(router([])).to.deep.equal({
      directoryAddr: [{ host: '127.0.0.1', port: 50051 }],
      httpPort: 8888,
      loadBalancePolicy: 'RR',
      carPrefillLambda: 0.5,
      carHostHitWeight: 0.5,
      carInflightLoad: true,
      carPendingPrefix: true,
      carClaimWaitMs: 20,
      carClaimPrefillTokens: 1024,
      carClaimWaitFraction: 0.3,
      ttftPrefillTokensPerS: 8000,
      ttftPriorSamples: 8,
      ttftThroughputWindow: 64,
      ttftHostTokenCost: 0.25,
      ttftWorkSlack: 1,
      ttftSlackGrowth: 2,
      ttftTieTolerance: 0.05,
      internalApiToken: '',
      grpcTlsCa: '',
      grpcTlsCert: '',
      grpcTlsKey: '',
      viewStaleAfterMs: 3000,
      targetTtftMs: null,
      targetTpotMs: null,
      tokenizer: '',
      chatTemplate: '',
      modelsFile: '',
      logLevel: 'info',
    });
  });

  it('router: --load_balance_policy is RR | SLO_AWARE | CAR | TTFT; anything else is a startup error', () => {
    expect(router(['--load_balance_policy=CAR']).loadBalancePolicy).to.equal('CAR');
    expect(router(['--load_balance_policy=SLO_AWARE']).loadBalancePolicy).to.equal('SLO_AWARE');
    expect(router(['--load_balance_policy=ttft']).loadBalancePolicy).to.equal('TTFT');
    expect(configError(() => router(['--load_balance_policy=LEAST_LOAD'])).message).to.equal(
      'invalid --load_balance_policy: expected one of RR, SLO_AWARE, CAR, TTFT, got "LEAST_LOAD"',
    );
  });

  it('router: the TTFT flags and their bounds (prior throughput > 0, samples ≥ 0, window ≥ 1, host cost and work slack in [0,1], slack growth in [0, 10], tie tolerance in [0, 0.5])', () => {
    expect(router(['--ttft_prefill_tokens_per_s=2500.5', '--ttft_prior_samples=0', '--ttft_throughput_window=1', '--ttft_host_token_cost=1', '--ttft_work_slack=0', '--ttft_slack_growth=0', '--ttft_tie_tolerance=0'])).to.include({
      ttftPrefillTokensPerS: 2500.5,
      ttftPriorSamples: 0,
      ttftThroughputWindow: 1,
      ttftHostTokenCost: 1,
      ttftWorkSlack: 0,
      ttftSlackGrowth: 0,
      ttftTieTolerance: 0,
    });
    expect(configError(() => router(['--ttft_tie_tolerance=0.6'])).message).to.equal('invalid --ttft_tie_tolerance: expected a number in [0, 0.5], got "0.6"');
    expect(configError(() => router(['--ttft_slack_growth=-1'])).message).to.equal('invalid --ttft_slack_growth: expected a number in [0, 10], got "-1"');
    expect(configError(() => router(['--ttft_slack_growth=wide'])).message).to.match(/^invalid --ttft_slack_growth: expected a number/);
    expect(configError(() => router(['--ttft_work_slack=2'])).message).to.equal('invalid --ttft_work_slack: expected a number in [0, 1], got "2"');
    expect(configError(() => router(['--ttft_prefill_tokens_per_s=0'])).message).to.equal('invalid --ttft_prefill_tokens_per_s: expected a number in [1, 100000000], got "0"');
    configError(() => router(['--ttft_prefill_tokens_per_s=fast']));
    expect(configError(() => router(['--ttft_prior_samples=-1'])).message).to.match(/^invalid --ttft_prior_samples: /);
    configError(() => router(['--ttft_prior_samples=1.5']));
    expect(configError(() => router(['--ttft_throughput_window=0'])).message).to.match(/^invalid --ttft_throughput_window: /);
    expect(configError(() => router(['--ttft_host_token_cost=1.5'])).message).to.equal('invalid --ttft_host_token_cost: expected a number in [0, 1], got "1.5"');
    configError(() => router(['--ttft_host_token_cost=-0.1']));
  });

  it('router: lambda and host hit weight in [0,1]', () => {
    for (const flag of ['car_prefill_lambda', 'car_host_hit_weight']) {
      expect(() => router([`--${flag}=0`])).to.not.throw();
      expect(() => router([`--${flag}=1`])).to.not.throw();
      expect(configError(() => router([`--${flag}=1.5`])).message).to.equal(`invalid --${flag}: expected a number in [0, 1], got "1.5"`);
      configError(() => router([`--${flag}=-0.01`]));
    }
  });

  it('router: --car_inflight_load is on by default; false, bare, and a bad value', () => {
    expect(router(['--car_inflight_load=false']).carInflightLoad).to.equal(false);
    expect(router(['--car_inflight_load']).carInflightLoad).to.equal(true);
    expect(configError(() => router(['--car_inflight_load=maybe'])).message).to.match(/^invalid --car_inflight_load: /);
  });

  it('router: --car_claim_wait_ms accepts 0..1000 ms and names the range otherwise', () => {
    expect(router(['--car_claim_wait_ms=0']).carClaimWaitMs).to.equal(0);
    expect(router(['--car_claim_wait_ms=1000']).carClaimWaitMs).to.equal(1000);
    expect(configError(() => router(['--car_claim_wait_ms=1001'])).message).to.match(/^invalid --car_claim_wait_ms: /);
    configError(() => router(['--car_claim_wait_ms=-1']));
    configError(() => router(['--car_claim_wait_ms=soon']));
  });

  it('router: view staleness, SLO targets, directory list', () => {
    expect(router(['--view_stale_after_ms=100']).viewStaleAfterMs).to.equal(100);
    configError(() => router(['--view_stale_after_ms=99']));
    expect(router(['--target_ttft=200', '--target_tpot=20'])).to.include({ targetTtftMs: 200, targetTpotMs: 20 });
    configError(() => router(['--target_ttft=-1']));
    expect(router(['--directory_addr=d1:50051,d2:50052']).directoryAddr).to.have.length(2);
    configError(() => router(['--directory_addr=d1:0']));
  });

  it('router: --help text names every flag', () => {
    const text = routerHelp();
    for (const name of Object.keys(ROUTER_FLAGS)) expect(text).to.include(`--${name}=`);
  });
});

describe('architecture.md flags: meta-svc table', () => {
  const meta = (argv: string[], env: Record<string, string> = {}): MetaFlags => {
    const p = parseMetaFlags(argv, env);
    if (p.kind !== 'flags') throw new Error('help');
    return p.flags;
  };

  it('meta: every default; --meta_store parses into the store it names', () => {
    expect(meta([])).to.deep.equal({
      httpPort: 6382,
      metaConfigFile: '',
      metaStore: 'sqlite:./data/kvcm.db',
      nodeId: '',
      internalApiToken: '',
      logLevel: 'info',
      store: { kind: 'sqlite', path: './data/kvcm.db' },
    });
    expect(meta(['--meta_store=redis://10.0.0.5:6379/3']).store).to.deep.equal({ kind: 'redis', host: '10.0.0.5', port: 6379, db: 3, namespace: 'default', url: 'redis://10.0.0.5:6379/3' });
    // Every replica of one cluster shares the namespace, not its node_id; two clusters can share one db.
    expect(meta(['--meta_store=redis://h:1/2?namespace=eu-west.a']).store).to.include({ db: 2, namespace: 'eu-west.a' });
    expect(meta(['--meta_store=redis://h:1?namespace=b']).store).to.include({ db: 0, namespace: 'b' });
    expect(meta(['--meta_store=redis://[::1]:6379']).store).to.include({ host: '::1', db: 0 });
    expect(meta([], { KVCM_META_CONFIG_FILE: '/etc/kvcm.json' }).metaConfigFile).to.equal('/etc/kvcm.json');
  });

  it('meta: a store URL of another form is one error line naming --meta_store', () => {
    for (const v of ['redis://h', 'redis://h:70000', 'redis://h:1/16', 'redis://user:pw@h:1', 'redis://h:1/0?namespace=', 'redis://h:1/0?namespace={x}', 'redis://h:1/0?ns=a', 'sqlite:', 'file:/x']) {
      expect(configError(() => meta([`--meta_store=${v}`])).path, v).to.equal('--meta_store');
    }
  });

  it('meta: --help text names every flag', () => {
    const text = metaHelp();
    expect(text).to.match(/^Usage: node dist\/meta-svc\/main\.js/);
    for (const name of Object.keys(META_FLAGS)) expect(text).to.include(`--${name}=`);
  });
});
