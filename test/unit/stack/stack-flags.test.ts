// The local stack's flags and port layout (tools/stack/stack-flags.ts, tools/stack/port-plan.ts).
import { expect } from 'chai';
import { createServer, type Server } from 'node:net';
import { ConfigError } from '../../../shared/config/config-error.js';
import { parseEngines, parseStackArgs, type StackConfig } from '../../../tools/stack/stack-flags.js';
import { assertPortsFree, enginePorts, findFreeEngineBase, layoutDnsEngines, layoutEngines, PortTakenError } from '../../../tools/stack/port-plan.js';
import { isFetchBadPort } from '../../../shared/http/fetch-bad-ports.js';
import { directoryCommand, engineCommand, routerCommand, writeDnsEnginesFile, writeEnginesFile, writeModelsFile } from '../../../tools/stack/service-commands.js';
import { parseEngineSimArgs } from '../../../tools/engine-sim/engine-sim-flags.js';
import { parseRouterFlags } from '../../../shared/config/router-flags.js';
import { readModelsFile } from '../../../shared/config/models-file.js';
import { bundledLlama31TokenizerDir, bundledQwen3TokenizerDir } from '../../../shared/tokenize/bundled-tokenizer.js';
import { parseEnginesFile } from '../../../directory-svc/engines/engines-file.js';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../helpers/ports.js';

/** A command's flags: what follows its entry script (`node [--import tsx] <entry> ...`). */
function flagsOf(cmd: { args: readonly string[] }): string[] {
  return cmd.args.slice(cmd.args.findIndex((a) => /\.(ts|js)$/.test(a)) + 1);
}

function cfg(argv: string[]): StackConfig {
  const c = parseStackArgs(argv);
  if (c === 'help') throw new Error('expected a config');
  return c;
}

describe('local stack flags and port plan (tools/stack)', () => {
  let server: Server | null = null;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server === null ? resolve() : server.close(() => resolve())));
    server = null;
  });

  it('defaults: architecture.md ports, two DEFAULT engines and a PREFILL/DECODE pair serving qwen3 + sql-lora, one DEFAULT engine serving llama-3.1, CAR, demo on', () => {
    const c = cfg([]);
    expect(c).to.include({ routerPort: 8888, directoryGrpcPort: 50051, directoryHttpPort: 8889, metaPort: 6382, etcdPort: 2379, loadBalancePolicy: 'CAR', demo: true, demoOnly: false });
    expect(c.engines.map((e) => `${e.type}:${e.dpSize} ${e.servedModels.join(',')}`)).to.deep.equal([
      'DEFAULT:1 qwen3,sql-lora',
      'DEFAULT:1 qwen3,sql-lora',
      'PREFILL:1 qwen3,sql-lora',
      'DECODE:1 qwen3,sql-lora',
      'DEFAULT:1 llama-3.1',
    ]);
    expect(c.engines.map((e) => e.tokenizerDir)).to.deep.equal([...Array(4).fill(bundledQwen3TokenizerDir()), bundledLlama31TokenizerDir()]);
    expect([c.model, c.adapter, c.secondModel]).to.deep.equal(['qwen3', 'sql-lora', { model: 'llama-3.1', tokenizerDir: bundledLlama31TokenizerDir() }]);
  });

  it('cache-identity: --model, --adapter, --second_model name the fleet\'s models (empty: none), each a distinct model name without a comma', () => {
    const single = cfg(['--adapter=', '--second_model=', '--model=demo']);
    expect([single.adapter, single.secondModel, single.engines.map((e) => e.servedModels.join(','))]).to.deep.equal([null, null, ['demo', 'demo', 'demo', 'demo']]);
    expect(cfg(['--second_tokenizer=/models/mistral', '--second_model=mistral']).engines.at(-1)).to.deep.equal({ type: 'DEFAULT', dpSize: 1, servedModels: ['mistral'], tokenizerDir: '/models/mistral' });
    expect(() => cfg(['--adapter=qwen3'])).to.throw(ConfigError, 'invalid --adapter: "qwen3" is also --model');
    expect(() => cfg(['--second_model=sql-lora'])).to.throw(ConfigError, 'invalid --second_model: "sql-lora" is also --adapter');
    expect(() => cfg(['--adapter=a,b'])).to.throw(ConfigError, 'invalid --adapter: expected no comma, got "a,b"');
    expect(() => cfg(['--model='])).to.throw(ConfigError, 'invalid --model: expected a non-empty string, got ""');
  });

  it('cache-identity: every engine command carries its --served_models and its model\'s --tokenizer; the router gets a --models_file its own parser accepts, naming both tokenizers', () => {
    const c = cfg(['--engine_kind=vllm']);
    const planned = layoutEngines(c.engines, 8000);
    for (const e of planned) {
      const parsed = parseEngineSimArgs(flagsOf(engineCommand(c, e)));
      if (parsed === 'help') throw new Error('help');
      expect([parsed.servedModels.names, parsed.tokenizerDir]).to.deep.equal([e.servedModels, e.tokenizerDir]);
    }
    const dir = mkdtempSync(join(tmpdir(), 'stack-models-'));
    try {
      const file = writeModelsFile(c, dir);
      expect(readModelsFile(file).map((m) => [m.model, m.tokenizer])).to.deep.equal([
        ['qwen3', bundledQwen3TokenizerDir()],
        ['llama-3.1', bundledLlama31TokenizerDir()],
      ]);
      const router = parseRouterFlags(flagsOf(routerCommand(c, file)));
      if (router.kind === 'help') throw new Error('help');
      expect([router.flags.modelsFile, router.flags.tokenizer]).to.deep.equal([file, '']);
      // vLLM engines are listed without pins: the directory reads each one's /v1/models.
      const entries = parseEnginesFile(readFileSync(writeEnginesFile(c, planned, dir), 'utf8')).engines;
      expect(entries.map((e) => e.models)).to.deep.equal([null, null, null, null, null]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(directoryCommand(c, '/kv.json', '/engines.json').args).to.include('--engines_models_refresh_ms=2000');
  });

  it('--engine_kind defaults to xllm; vllm and sglang fleets take DEFAULT, PREFILL and DECODE but not MIX', () => {
    expect(cfg([]).engineKind).to.equal('xllm');
    expect(cfg(['--engine_kind=vllm']).engineKind).to.equal('vllm');
    expect(() => cfg(['--engine_kind=sglang', '--engines=DEFAULT,MIX'])).to.throw(ConfigError, 'invalid --engines: MIX engines are xLLM only; --engine_kind=sglang takes DEFAULT|PREFILL|DECODE');
  });

  it('--engines takes TYPE[:dp] entries, case-insensitive, and refuses anything else in one line', () => {
    expect(parseEngines('default:2, mix').map((e) => `${e.type}:${e.dpSize}`)).to.deep.equal(['DEFAULT:2', 'MIX:1']);
    for (const bad of ['', 'GPU', 'DEFAULT:0', 'DEFAULT:17', 'DEFAULT:x']) {
      expect(() => parseEngines(bad), bad).to.throw(ConfigError, /^invalid --engines: /);
    }
  });

  it('two port flags with the same value are a startup error naming both', () => {
    expect(() => cfg(['--router_port=9000', '--meta_port=9000'])).to.throw(ConfigError, 'invalid --meta_port: 9000 is also --router_port');
    expect(cfg(['--meta_port=0', '--router_port=9000']).metaPort).to.equal(0);
  });

  it('engines are laid out dp_size ports apart, so their event (+10000) and snapshot (+30000) ranges never overlap', () => {
    const planned = layoutEngines(parseEngines('DEFAULT:2,PREFILL,DECODE:3'), 8000);
    expect(planned.map((e) => e.httpPort)).to.deep.equal([8000, 8002, 8003]);
    const ports = planned.flatMap((e, i) => enginePorts(e, i)).map((p) => p.port);
    expect(new Set(ports).size).to.equal(ports.length);
    expect(ports).to.include.members([18000, 18001, 38000, 38001, 18002, 38002, 18003, 18005, 38005]);
  });

  it('a port something already listens on is PortTakenError naming its flag', async () => {
    const port = await freePort();
    server = createServer();
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', () => resolve()));
    try {
      await assertPortsFree([{ port, owner: '--router_port' }]);
      expect.fail('expected PortTakenError');
    } catch (e) {
      expect(e).to.be.instanceOf(PortTakenError);
      expect((e as Error).message).to.equal(`port ${port} (--router_port) is already in use: stop whatever holds it or choose another port with the flag`);
    }
  });

  it("a port fetch refuses (the Fetch standard's blocked ports) is refused naming its flag, and every listed one is one Node's fetch refuses", async () => {
    for (const port of [2049, 6000, 10080]) {
      expect(isFetchBadPort(port)).to.equal(true);
      const err = await fetch(`http://127.0.0.1:${port}/`).then(
        () => null,
        (e: unknown) => e as Error & { cause?: Error },
      );
      expect(err?.cause?.message, `fetch to ${port}`).to.equal('bad port');
    }
    expect(isFetchBadPort(8000)).to.equal(false);
    try {
      await assertPortsFree([{ port: 2049, owner: '--engine_base_port: engine 0 HTTP' }]);
      expect.fail('expected a refusal');
    } catch (e) {
      expect((e as Error).message).to.equal("port 2049 (--engine_base_port: engine 0 HTTP) is one fetch clients refuse to connect to (the Fetch standard's blocked ports): choose another port with the flag");
    }
  });

  it('--engine_base_port=0 picks a layout below the ephemeral range with no port fetch refuses', async () => {
    const engines = parseEngines('DEFAULT:2,PREFILL,DECODE:3');
    for (let i = 0; i < 20; i++) {
      const ports = layoutEngines(engines, await findFreeEngineBase(engines, new Set())).flatMap((e, k) => enginePorts(e, k)).map((p) => p.port);
      expect(ports.filter((p) => p >= 32768 || isFetchBadPort(p)), String(ports)).to.deep.equal([]);
    }
  });

  it('E18 a vLLM/SGLang stack runs no etcd: the directory gets --etcd_addr= and the etcd ports are not planned', () => {
    const c = cfg(['--engine_kind=vllm', '--router_port=2379']);
    const args = directoryCommand(c, '/kv.json', '/engines.json').args;
    expect(args).to.include('--etcd_addr=');
    expect(engineCommand(c, layoutEngines(c.engines, 8000)[0]!).args).to.include('--etcd_addr=');
    expect(directoryCommand(cfg([]), '/kv.json').args).to.include('--etcd_addr=127.0.0.1:2379');
    expect(() => cfg(['--router_port=2379']), 'xllm still plans etcd').to.throw(ConfigError, 'invalid --etcd_port: 2379 is also --router_port');
  });

  it('E15 --engines_dns: vllm/sglang only, three DEFAULT engines unless --engines says otherwise, all of one TYPE[:dp], one model (no --second_model)', () => {
    const c = cfg(['--engine_kind=vllm', '--engines_dns']);
    expect(c.enginesDns).to.equal(true);
    expect(c.engines.map((e) => `${e.type}:${e.dpSize} ${e.servedModels.join(',')}`)).to.deep.equal(['DEFAULT:1 qwen3,sql-lora', 'DEFAULT:1 qwen3,sql-lora', 'DEFAULT:1 qwen3,sql-lora']);
    expect(c.secondModel).to.equal(null);
    expect(() => cfg(['--engine_kind=vllm', '--engines_dns', '--second_model=llama-3.1'])).to.throw(ConfigError, /^invalid --second_model: --engines_dns runs one model behind one DNS name/);
    expect(cfg(['--engine_kind=sglang', '--engines_dns', '--engines=PREFILL:2,PREFILL:2']).engines.length).to.equal(2);
    expect(() => cfg(['--engines_dns'])).to.throw(ConfigError, 'invalid --engines_dns: xLLM engines register in etcd; use --engine_kind=vllm or sglang');
    expect(() => cfg(['--engine_kind=vllm', '--engines_dns', '--engines=DEFAULT,PREFILL'])).to.throw(ConfigError, /^invalid --engines: with --engines_dns every engine has the same TYPE\[:dp\]/);
  });

  it('E15 --engines_dns lays the engines out on one port at 127.0.0.2.., bound with --host, behind one DNS entry the directory validates', () => {
    const c = cfg(['--engine_kind=vllm', '--engines_dns', '--block_size=16']);
    const planned = layoutDnsEngines(c.engines, 8000);
    expect(planned.map((e) => `${e.host}:${e.httpPort}`)).to.deep.equal(['127.0.0.2:8000', '127.0.0.3:8000', '127.0.0.4:8000']);
    expect(engineCommand(c, planned[1]!).args).to.include.members(['--name=127.0.0.1:8000', '--host=127.0.0.3']);
    const dir = mkdtempSync(join(tmpdir(), 'stack-dns-'));
    try {
      const file = parseEnginesFile(readFileSync(writeDnsEnginesFile(c, planned[0]!, 'vllm.kv-stack.test', dir), 'utf8'));
      expect(file.engines).to.deep.equal([]);
      expect(file.dnsEntries).to.deep.equal([
        { dns: 'vllm.kv-stack.test', srv: false, port: 8000, kind: 'vllm', role: 'DEFAULT', blockSize: 16, models: null, eventPort: null, replayPort: null, dpSize: 1, topic: '' },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(directoryCommand(c, '/kv.json', '/engines.json', { address: '127.0.0.1:5353' }).args).to.include.members(['--engines_dns_server=127.0.0.1:5353', '--engines_dns_refresh_ms=1000']);
  });
});
