// kvctl's pure parts: table layout (tools/kvctl/table.ts), the per-command renderings
// (tools/kvctl/render.ts) and flag validation (tools/kvctl/kvctl-flags.ts).
import { expect } from 'chai';
import { isConfigError } from '../../../shared/config/config-error.js';
import { parseKvctlArgs, parseTokenIds } from '../../../tools/kvctl/kvctl-flags.js';
import { durationText, modelsText, renderInstances, renderQuery, renderStreams } from '../../../tools/kvctl/render.js';
import { formatKeyValues, formatTable } from '../../../tools/kvctl/table.js';

function configErrorLine(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (isConfigError(e)) return e.message;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

describe('kvctl tables', () => {
  it('pads each column to its widest cell, right-aligns numeric columns and trims trailing spaces', () => {
    const out = formatTable(
      [{ header: 'NAME' }, { header: 'N', align: 'right' }, { header: 'NOTE' }],
      [
        ['a', '7', ''],
        ['longer-name', '1234', 'x'],
      ],
    );
    expect(out).to.equal(['NAME            N  NOTE', 'a               7', 'longer-name  1234  x', ''].join('\n'));
  });

  it('prints only the header for no rows, and counts a multi-byte character as one column', () => {
    expect(formatTable([{ header: 'A' }, { header: 'B' }], [])).to.equal('A  B\n');
    expect(formatTable([{ header: 'A' }, { header: 'B' }], [['→x', '1'], ['abc', '2']])).to.equal('A    B\n→x   1\nabc  2\n');
  });

  it('keeps a cell on one line when its text holds newlines or tabs', () => {
    expect(formatTable([{ header: 'ERROR' }], [['parse: bad\nframe\tx']])).to.equal('ERROR\nparse: bad frame x\n');
  });

  it('refuses a row whose cell count differs from the columns', () => {
    expect(() => formatTable([{ header: 'A' }], [['1', '2']])).to.throw(RangeError, 'row 0 has 2 cells, expected 1');
  });

  it('aligns key/value lines on the longest key', () => {
    expect(formatKeyValues([['a', '1'], ['longer', '2']])).to.equal('a       1\nlonger  2\n');
  });

  it('renders streams with ok/failed recoveries and only the non-zero sync_lost classes', () => {
    const counters = {
      batches_applied: '5', topic_mismatch: '0', skipped_out_of_scope: '0', skipped_descendant: '0', skipped_orphan: '0',
      sync_lost: { timeout: '1', gap: '2', parse: '0' }, recoveries_ok: '3', recoveries_failed: '1', restores: '0', silent_loss: '0', reconcile_failures: '0', skipped_medium: '0', skipped_multimodal: '0', skipped_group: '0',
    };
    const out = renderStreams({
      streams: [
        {
          instance_name: 'a:8000', dp_rank: 1, block_size: 4, endpoint: 'tcp://a:18001', replay_endpoint: 'tcp://a:38001', topic: '', hash_seed: '1024', engine_kind: 'vllm',
          state: 'RECOVERING', synchronized: false, sequence: '41', error: 'gap: expected 42, got 44', device_blocks: '0', host_blocks: '0', entry_count: '0', counters,
        },
      ],
    });
    expect(out.split('\n')[1]).to.equal('a:8000     1  vllm  RECOVERING   41       0     0        0        5         3/1  gap:2 timeout:1  -        gap: expected 42, got 44');
    expect(renderStreams({ streams: [] })).to.equal('no streams\n');
  });

  it('CI3/CI4 renders the non-zero skip counts by reason, multimodal and group among them', () => {
    const counters = {
      batches_applied: '5', topic_mismatch: '0', skipped_out_of_scope: '1', skipped_descendant: '0', skipped_orphan: '0',
      sync_lost: {}, recoveries_ok: '1', recoveries_failed: '0', restores: '0', silent_loss: '0', reconcile_failures: '0', skipped_medium: '0', skipped_multimodal: '3', skipped_group: '12',
    };
    const out = renderStreams({
      streams: [
        {
          instance_name: 'v:8000', dp_rank: 0, block_size: 16, endpoint: 'tcp://v:5557', replay_endpoint: '', topic: '', hash_seed: '1024', engine_kind: 'vllm',
          state: 'SYNCHRONIZED', synchronized: true, sequence: '9', error: '', device_blocks: '4', host_blocks: '0', entry_count: '4', counters,
        },
      ],
    });
    const [head, row] = out.split('\n');
    expect(head!.split(/\s+/)).to.include('SKIPPED');
    expect(row).to.contain('group:12 multimodal:3 out_of_scope:1');
  });

  it('renders instances with "-" for a missing load and heartbeat, and flags a disconnected etcd', () => {
    const out = renderInstances({
      etcd_connected: false,
      instances: [
        {
          name: 'b:8000', type: 'MIX', current_role: 'PREFILL', incarnation_id: '', register_ts_ms: '0', dp_size: 2, state: 'LEASE_LOST', schedulable: true,
          load: { waiting_requests_num: '3', gpu_cache_usage_perc: 0.425, recent_max_ttft: 0, recent_max_tbt: 0, reported_at_ms: '0' },
          ttft_profiling_data: [], tpot_profiling_data: [], generation: '1', heartbeat_age_ms: '1500', excluded_reason: '', backend_type: 'xllm',
        },
        {
          name: 'c:8000', type: 'DECODE', current_role: '', incarnation_id: 'i2', register_ts_ms: '0', dp_size: 1, state: 'ACTIVE', schedulable: true,
          load: null, ttft_profiling_data: [], tpot_profiling_data: [], generation: '2', heartbeat_age_ms: '-1', excluded_reason: '', backend_type: 'xllm',
          source: 'etcd', models: { data: [{ name: 'llama', parent: '' }] },
        },
      ],
    });
    const lines = out.split('\n');
    expect(lines[0]).to.equal('etcd: DISCONNECTED (last known instance table)');
    expect(lines[1]).to.equal('NAME    SOURCE  TYPE    ROLE     STATE       SCHEDULABLE  DP  INCARNATION  WAITING  GPU_CACHE  HEARTBEAT_AGE  MODELS   EXCLUDED');
    // An older directory sends neither source nor models: "-" and an unknown list.
    expect(lines[2]).to.equal('b:8000  -       MIX     PREFILL  LEASE_LOST  yes           2  -                  3      42.5%           1.5s  unknown  -');
    expect(lines[3]).to.equal('c:8000  etcd    DECODE  -        ACTIVE      yes           1  i2                 -          -              -  llama    -');
  });

  it('CI6 shows each instance\'s served models: base by name, adapters marked +, another parent named, unknown and empty lists apart', () => {
    expect(modelsText({ data: [{ name: 'llama-3.1-8b', parent: '' }, { name: 'sql-lora', parent: 'llama-3.1-8b' }, { name: 'chat-lora', parent: 'llama-3.1-8b' }] })).to.equal('llama-3.1-8b +sql-lora +chat-lora');
    // vLLM lists one base per --served-model-name alias; an adapter of the second is named with it.
    expect(modelsText({ data: [{ name: 'llama', parent: '' }, { name: 'llama-alias', parent: '' }, { name: 'x', parent: 'llama-alias' }] })).to.equal('llama llama-alias +x(llama-alias)');
    expect(modelsText(null)).to.equal('unknown');
    expect(modelsText(undefined)).to.equal('unknown');
    expect(modelsText({ data: [] })).to.equal('none');
    const out = renderInstances({
      etcd_connected: true,
      instances: [
        {
          name: 'vllm-0', type: 'DEFAULT', current_role: '', incarnation_id: '1.7e+09', register_ts_ms: '0', dp_size: 1, state: 'ACTIVE', schedulable: true,
          load: null, ttft_profiling_data: [], tpot_profiling_data: [], generation: '3', heartbeat_age_ms: '-1', excluded_reason: '', backend_type: 'vllm',
          source: 'engines_file', models: { data: [{ name: 'llama', parent: '' }, { name: 'sql-lora', parent: 'llama' }] },
        },
      ],
    });
    const row = out.split('\n')[2]!;
    expect(row.split(/ {2,}/).slice(0, 2)).to.deep.equal(['vllm-0', 'engines_file']);
    expect(row).to.match(/ {2}llama \+sql-lora {2}-$/);
  });

  it('E15 renders which DNS name an engine came from, and says when the directory runs without etcd', () => {
    const row = (name: string, source: string) => ({
      name, source, type: 'DEFAULT', current_role: '', incarnation_id: '', register_ts_ms: '0', dp_size: 1, state: 'ACTIVE', schedulable: true,
      load: null, ttft_profiling_data: [], tpot_profiling_data: [], generation: '1', heartbeat_age_ms: '-1', excluded_reason: '', backend_type: 'vllm',
    });
    const out = renderInstances({ etcd_connected: false, etcd_disabled: true, instances: [row('127.0.0.2:8000', 'dns:vllm.fleet.test'), row('vllm-0', 'engines_file')] });
    const lines = out.split('\n');
    expect(lines[0]).to.equal('etcd: not used (--etcd_addr= empty)');
    expect(lines[1]!.split(/\s+/).slice(0, 3)).to.deep.equal(['NAME', 'SOURCE', 'TYPE']);
    expect(lines[2]!.split(/\s+/).slice(0, 2)).to.deep.equal(['127.0.0.2:8000', 'dns:vllm.fleet.test']);
    expect(lines[3]!.split(/\s+/).slice(0, 2)).to.deep.equal(['vllm-0', 'engines_file']);
  });

  it('renders a query with no streams and marks a mixed block size', () => {
    expect(renderQuery({ input_tokens: 3, block_size: 0, matches: [] })).to.equal('input_tokens 3, block_size - (none or mixed)\nno streams\n');
  });

  it('writes durations at a readable scale', () => {
    expect([durationText(850), durationText(12_340), durationText(245_000), durationText(7_380_000)]).to.deep.equal(['850ms', '12.3s', '4m05s', '2h03m']);
  });
});

describe('kvctl flags', () => {
  it('takes the command first and --name=value flags after it, with the directory default 127.0.0.1:50051', () => {
    const o = parseKvctlArgs(['streams', '--json']);
    expect(o).to.not.equal('help');
    if (o === 'help') return;
    expect(o.command).to.equal('streams');
    expect(o.json).to.equal(true);
    expect(o.directoryAddrs).to.deep.equal([{ host: '127.0.0.1', port: 50051 }]);
    expect(parseKvctlArgs(['query', '--tokens=1,2,3'])).to.include({ command: 'query', model: '', cacheSalt: '' }).and.to.have.deep.property('tokenIds', [1, 2, 3]);
    expect(parseKvctlArgs(['query', '--tokens=1', '--model=sql-lora', '--cache_salt=tenant-a'])).to.include({ model: 'sql-lora', cacheSalt: 'tenant-a' });
    expect(parseKvctlArgs(['--help'])).to.equal('help');
  });

  it('rejects a missing or unknown command, flags of another command, and query without exactly one token source', () => {
    expect(configErrorLine(() => parseKvctlArgs([]))).to.equal('missing command: expected one of streams, instances, query, stats (see --help)');
    expect(configErrorLine(() => parseKvctlArgs(['nodes']))).to.equal('unknown command "nodes": expected one of streams, instances, query, stats');
    expect(configErrorLine(() => parseKvctlArgs(['stats', '--tokens=1']))).to.equal('invalid --tokens: only the query command takes it');
    expect(configErrorLine(() => parseKvctlArgs(['instances', '--model=llama']))).to.equal('invalid --model: only the query command takes it');
    expect(configErrorLine(() => parseKvctlArgs(['streams', '--cache_salt=s']))).to.equal('invalid --cache_salt: only the query command takes it');
    expect(configErrorLine(() => parseKvctlArgs(['query']))).to.equal('query needs exactly one of --tokens=1,2,3 or --tokens_file=<path>');
    expect(configErrorLine(() => parseKvctlArgs(['query', '--tokens=1', '--tokens_file=f']))).to.equal('query needs exactly one of --tokens=1,2,3 or --tokens_file=<path>');
    expect(configErrorLine(() => parseKvctlArgs(['stats', '--directory_addr=nohost']))).to.match(/^invalid --directory_addr: expected host:port/);
    expect(configErrorLine(() => parseKvctlArgs(['stats', '--directory-addr=x:1']))).to.equal('unknown flag --directory-addr (did you mean --directory_addr?)');
  });

  it('reads token ids as a JSON array or separated by commas and whitespace, each in [0, 2^31)', () => {
    expect(parseTokenIds('[1, 2, 3]', 'f')).to.deep.equal([1, 2, 3]);
    expect(parseTokenIds(' 1,2\n3  4 ', 'f')).to.deep.equal([1, 2, 3, 4]);
    expect(configErrorLine(() => parseTokenIds('1,2147483648', '--tokens'))).to.equal('invalid --tokens: token id #2 "2147483648" is not an integer in [0, 2^31)');
    expect(configErrorLine(() => parseTokenIds('[1.5]', 'f'))).to.equal('invalid f: token id #1 1.5 is not an integer in [0, 2^31)');
    expect(configErrorLine(() => parseTokenIds('  ', '--tokens'))).to.equal('invalid --tokens: expected at least one token id');
  });
});
