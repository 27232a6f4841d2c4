// docker-compose.yml and Dockerfile, checked without a Docker engine: every service's command line
// goes through that service's OWN flag parser (directory-svc, meta-svc, router-svc, the engine simulator;
// etcd against an allow-list), every config file it names exists in the repo and validates, and
// the addresses agree with the ports they point at:
//
//   router-svc ──gRPC──▶ directory-svc:grpc_port
//   engine-N ──etcd──▶ etcd:2379 ◀──etcd── directory-svc
//   engine-N ──heartbeat──▶ directory-svc:http_port
//   directory-svc ──ZMQ──▶ engine-N:(port + discovery offsets + r)
import { expect } from 'chai';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { loadMetaConfig } from '../../../meta-svc/config/load-meta-config.js';
import { parseDirectoryFlags, type DirectoryFlags } from '../../../shared/config/directory-flags.js';
import { parseMetaFlags, type MetaFlags } from '../../../shared/config/meta-flags.js';
import { parseKvEventsConfig, type KvEventsConfig } from '../../../shared/config/kv-events-config.js';
import { parseRouterFlags, type RouterFlags } from '../../../shared/config/router-flags.js';
import { parseEngineSimArgs, type EngineSimConfig } from '../../../tools/engine-sim/engine-sim-flags.js';
import { parseEnginesFile } from '../../../directory-svc/engines/engines-file.js';
import { readTokenizerFiles } from '../../../shared/tokenize/tokenizer-files.js';
import { readModelsFile } from '../../../shared/config/models-file.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
/** WORKDIR of the image: relative paths in commands are relative to it. */
const WORKDIR = '/app';

interface ComposeService {
  image?: string;
  build?: string | { context: string };
  command?: string[] | string;
  hostname?: string;
  ports?: (string | number)[];
  expose?: (string | number)[];
  depends_on?: Record<string, unknown> | string[];
  healthcheck?: { test: string[] | string };
  volumes?: string[];
}

const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, ComposeService>; volumes?: Record<string, unknown> };
const services = compose.services;
const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');

/** Services whose command runs `dist/<entry>.js`, by entry. */
function servicesRunning(entry: string): string[] {
  return Object.keys(services).filter((name) => {
    const cmd = services[name]!.command;
    return Array.isArray(cmd) && cmd[1] === `dist/${entry}.js`;
  });
}

/** The flags after `node dist/<entry>.js` (exec form only: the argv the parser will see). */
function argsOf(name: string): string[] {
  const cmd = services[name]!.command;
  if (!Array.isArray(cmd)) throw new Error(`${name}: command must be a YAML list (exec form), got ${JSON.stringify(cmd)}`);
  return cmd.slice(2);
}

/** A path a command names inside the image → the repo file the Dockerfile bakes in there. */
function repoPathOf(containerPath: string): string {
  const rel = containerPath.startsWith(`${WORKDIR}/`) ? containerPath.slice(WORKDIR.length + 1) : containerPath;
  expect(rel.startsWith('/'), `${containerPath} is outside the image's ${WORKDIR}`).to.equal(false);
  return join(ROOT, rel);
}

function directoryFlags(): DirectoryFlags {
  const parsed = parseDirectoryFlags(argsOf('directory-svc'));
  if (parsed.kind === 'help') throw new Error('directory-svc command is --help');
  return parsed.flags;
}

function metaFlags(): MetaFlags {
  const parsed = parseMetaFlags(argsOf('meta-svc'));
  if (parsed.kind === 'help') throw new Error('meta-svc command is --help');
  return parsed.flags;
}

/** redis-server options the compose file may use (`--name value` pairs). */
const REDIS_OPTIONS = new Set(['--save', '--appendonly', '--appendfsync', '--dir', '--port', '--maxmemory', '--maxmemory-policy']);

/** The port the redis service listens on (`--port`, else Redis's 6379). */
function redisPort(): number {
  const args = services['redis']!.command as string[];
  const at = args.indexOf('--port');
  return at < 0 ? 6379 : Number(args[at + 1]);
}

function kvEventsConfig(): KvEventsConfig {
  return parseKvEventsConfig(readFileSync(repoPathOf(directoryFlags().kvEventsConfigFile), 'utf8'));
}

function routerFlags(): RouterFlags {
  const parsed = parseRouterFlags(argsOf('router-svc'));
  if (parsed.kind === 'help') throw new Error('router-svc command is --help');
  return parsed.flags;
}

function allEngines(): { service: string; cfg: EngineSimConfig }[] {
  return servicesRunning('tools/engine-sim/cli').map((service) => {
    const cfg = parseEngineSimArgs(argsOf(service));
    if (cfg === 'help') throw new Error(`${service} command is --help`);
    return { service, cfg };
  });
}

/** The xLLM engines (etcd registration, heartbeats). */
function engines(): { service: string; cfg: EngineSimConfig }[] {
  return allEngines().filter((e) => e.cfg.engineKind === 'xllm');
}

/** `--name=value` of etcd's command, by name; checked against the flags we know etcd has. */
const ETCD_FLAGS = new Set([
  'name',
  'data-dir',
  'listen-client-urls',
  'advertise-client-urls',
  'listen-peer-urls',
  'initial-advertise-peer-urls',
  'initial-cluster',
  'initial-cluster-state',
  'initial-cluster-token',
  'auto-compaction-retention',
  'auto-compaction-mode',
  'quota-backend-bytes',
  'log-level',
]);

function etcdFlags(): Map<string, string> {
  const cmd = services['etcd']!.command;
  expect(Array.isArray(cmd), 'etcd command is a list').to.equal(true);
  const [bin, ...args] = cmd as string[];
  expect(bin).to.match(/(^|\/)etcd$/);
  const out = new Map<string, string>();
  for (const a of args) {
    const m = /^--([a-z-]+)=(.+)$/.exec(a);
    expect(m, `etcd argument ${a} is --name=value`).to.not.equal(null);
    expect(ETCD_FLAGS.has(m![1]!), `etcd flag --${m![1]} is in the allow-list`).to.equal(true);
    out.set(m![1]!, m![2]!);
  }
  return out;
}

/** The port etcd serves clients on, as other containers reach it: `etcd:<port>`. */
function etcdClientAddress(): string {
  const advertised = new URL(etcdFlags().get('advertise-client-urls')!.split(',')[0]!);
  const listen = new URL(etcdFlags().get('listen-client-urls')!.split(',')[0]!);
  expect(advertised.hostname, 'etcd advertises its compose service name').to.equal('etcd');
  expect(advertised.port).to.equal(listen.port);
  return `etcd:${listen.port}`;
}

/** `HOST:CONTAINER` / `HOST_A-HOST_B:CONTAINER` / `CONTAINER` → host ports and the container port. */
function portMappings(name: string): { hostFrom: number | null; hostTo: number | null; container: number }[] {
  return (services[name]!.ports ?? []).map((p) => {
    const text = String(p).replace(/\/tcp$/, '');
    const m = /^(?:(\d+)(?:-(\d+))?:)?(\d+)$/.exec(text);
    expect(m, `${name} port mapping ${text}`).to.not.equal(null);
    const from = m![1] === undefined ? null : Number(m![1]);
    return { hostFrom: from, hostTo: m![2] === undefined ? from : Number(m![2]), container: Number(m![3]) };
  });
}

/** The port a `fetch('http://127.0.0.1:<port>/health')` healthcheck probes. */
function healthcheckPort(name: string): number {
  const test = services[name]!.healthcheck?.test;
  const text = Array.isArray(test) ? test.join(' ') : String(test);
  const m = /http:\/\/127\.0\.0\.1:(\d+)\/health/.exec(text);
  expect(m, `${name} healthcheck probes /health`).to.not.equal(null);
  return Number(m![1]);
}

describe('docker-compose.yml and Dockerfile', () => {
  it('every node service runs a dist/ entry whose source exists and that the image builds from the folders it copies', () => {
    const copied = [...dockerfile.matchAll(/^COPY\s+(?!--from)(\S+)\s+\.\/\S*$/gm)].map((m) => m[1]!);
    for (const [name, svc] of Object.entries(services)) {
      if (name === 'etcd' || name === 'redis') continue;
      expect(svc.build, `${name} builds ./Dockerfile`).to.equal('.');
      const cmd = svc.command as string[];
      expect(cmd[0], `${name} runs node`).to.equal('node');
      const m = /^dist\/(.+)\.js$/.exec(cmd[1] ?? '');
      expect(m, `${name} entry ${cmd[1]}`).to.not.equal(null);
      expect(existsSync(join(ROOT, `${m![1]}.ts`)), `${m![1]}.ts exists`).to.equal(true);
      expect(copied, `Dockerfile copies ${m![1]!.split('/')[0]}/`).to.include(m![1]!.split('/')[0]);
    }
  });

  it('the sources the image compiles import nothing outside the folders the Dockerfile copies (tsc in the image would fail)', () => {
    const copied = new Set([...dockerfile.matchAll(/^COPY\s+(?!--from)(\S+)\s+\.\/\S*$/gm)].map((m) => m[1]!));
    // tsconfig.build.json: the folders the image compiles, micro-benchmarks (*.bench.ts) left out.
    const build = JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')) as { include: string[]; exclude: string[] };
    expect(build.exclude).to.include('**/*.bench.ts');
    const sourceDirs = build.include.map((g) => g.split('/')[0]!);
    expect(sourceDirs).to.have.members(['shared', 'directory-svc', 'meta-svc', 'router-svc', 'tools']);
    for (const d of sourceDirs) expect(copied.has(d), `Dockerfile copies ${d}/`).to.equal(true);
    const walk = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.ts') && !e.name.endsWith('.bench.ts') ? [join(dir, e.name)] : []));
    for (const file of sourceDirs.flatMap((d) => walk(join(ROOT, d)))) {
      for (const m of readFileSync(file, 'utf8').matchAll(/from '(\.{1,2}\/[^']+)'/g)) {
        const top = relative(ROOT, resolve(dirname(file), m[1]!)).split('/')[0]!;
        expect(copied.has(top), `${relative(ROOT, file)} imports ${m[1]} (outside the copied folders)`).to.equal(true);
      }
    }
  });

  it('runtime sources import only production dependencies (the image prunes devDependencies)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const walk = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.ts') && !e.name.endsWith('.bench.ts') ? [join(dir, e.name)] : []));
    for (const file of ['shared', 'directory-svc', 'router-svc', 'tools'].flatMap((d) => walk(join(ROOT, d)))) {
      // `import type` lines vanish from the emitted JS, so only value imports must be installed.
      for (const m of readFileSync(file, 'utf8').matchAll(/^import (?!type )[^;]*?from '([^.'][^']*)'/gm)) {
        const spec = m[1]!;
        if (spec.startsWith('node:')) continue;
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
        expect(pkg.dependencies, `${relative(ROOT, file)} imports ${spec}`).to.have.property(name);
      }
    }
  });

  it('the Dockerfile builds on node:20-bookworm-slim with npm ci and runs as a non-root user with proto/ and deploy/', () => {
    const froms = [...dockerfile.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]);
    expect(froms.length).to.be.at.least(1);
    for (const f of froms) expect(f).to.equal('node:20-bookworm-slim');
    expect(dockerfile).to.match(/^RUN npm ci\b/m);
    expect(dockerfile).to.match(/tsc -p tsconfig\.build\.json/);
    const users = [...dockerfile.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1]);
    expect(users.at(-1)).to.be.a('string').and.not.match(/^(root|0)$/);
    expect(dockerfile).to.match(/^COPY proto \.\/proto$/m);
    expect(dockerfile).to.match(/^COPY deploy \.\/deploy$/m);
  });

  it('directory-svc: flags parse, its kv-events config file exists in deploy/ and validates', () => {
    const flags = directoryFlags();
    expect(flags.kvEventsConfigFile, 'a kv-events config is named').to.not.equal('');
    const kv = kvEventsConfig();
    expect(kv.discovery?.enabled, 'discovery enabled').to.equal(true);
  });

  it('meta-svc: flags parse, its config file exists in deploy/ and validates, its store is the redis service, it publishes a port range and health-checks its --http_port', () => {
    const flags = metaFlags();
    expect(servicesRunning('meta-svc/main')).to.deep.equal(['meta-svc']);
    const meta = loadMetaConfig({ configFile: repoPathOf(flags.metaConfigFile), httpPortOverride: flags.httpPort });
    expect(meta.ok, meta.ok ? '' : meta.errors.join('; ')).to.equal(true);
    // §9.4: replicas share Redis, so `--scale meta-svc=N` needs a host port range, not one port.
    expect(flags.store).to.include({ kind: 'redis', host: 'redis', port: redisPort() });
    expect(Object.keys(services['meta-svc']!.depends_on ?? {})).to.include('redis');
    const ports = portMappings('meta-svc');
    expect(ports.map((p) => p.container)).to.deep.equal([flags.httpPort]);
    for (const p of ports) expect(p.hostFrom !== null && p.hostTo! > p.hostFrom, 'meta-svc host port is a range').to.equal(true);
    expect(healthcheckPort('meta-svc')).to.equal(flags.httpPort);
  });

  it('redis: an official image, only known options, persistence on a declared volume, serving the port meta-svc uses', () => {
    const svc = services['redis']!;
    expect(svc.image).to.match(/^redis:7\.\d+-bookworm$/);
    const [bin, ...args] = svc.command as string[];
    expect(bin).to.equal('redis-server');
    for (let i = 0; i < args.length; i += 2) expect(REDIS_OPTIONS.has(args[i]!), `redis option ${args[i]}`).to.equal(true);
    const dirAt = args.indexOf('--dir');
    expect((svc.volumes ?? []).map((v) => v.split(':')[1])).to.include(args[dirAt + 1]);
    expect((svc.expose ?? []).map(String)).to.include(String(redisPort()));
  });

  it('etcd: only known flags, a one-member cluster naming itself, clients on the advertised port', () => {
    const f = etcdFlags();
    expect(services['etcd']!.image).to.match(/^quay\.io\/coreos\/etcd:v3\.5\.\d+$/);
    expect(f.get('initial-cluster')).to.equal(`${f.get('name')}=${f.get('initial-advertise-peer-urls')}`);
    expect(String(services['etcd']!.expose ?? [])).to.include(etcdClientAddress().split(':')[1]);
  });

  it('directory-svc and every engine use the etcd service, in the same namespace', () => {
    const etcd = etcdClientAddress();
    const dir = directoryFlags();
    expect(dir.etcdAddr.map((h) => `${h.host}:${h.port}`)).to.deep.equal([etcd]);
    for (const { service, cfg } of engines()) {
      expect(cfg.etcdHosts, `${service} --etcd_addr`).to.deep.equal([etcd]);
      expect(cfg.etcdNamespace, `${service} --etcd_namespace`).to.equal(dir.etcdNamespace);
    }
  });

  it('router-svc: flags parse and --directory_addr is the directory service at its --grpc_port', () => {
    const flags = routerFlags();
    const dir = directoryFlags();
    expect(flags.directoryAddr.map((h) => `${h.host}:${h.port}`)).to.deep.equal([`directory-svc:${dir.grpcPort}`]);
    expect(flags.internalApiToken).to.equal(dir.internalApiToken);
  });

  it('tokenization.md, cache-identity §5: the router\'s --models_file names every base model the engines serve with the --tokenizer those engines use, each a production dependency inside the image that loads', () => {
    const flags = routerFlags();
    expect(flags.modelsFile, 'router-svc --models_file').to.not.equal('');
    const models = readModelsFile(repoPathOf(flags.modelsFile));
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const m of models) {
      expect(m.tokenizer, `${m.model} tokenizer`).to.match(/^node_modules\//);
      // The runtime image keeps only production node_modules: the tokenizer's package must be one.
      const name = m.tokenizer.split('/').slice(1, 3).join('/');
      expect(Object.keys(pkg.dependencies), `${name} is a production dependency`).to.include(name);
      expect(readTokenizerFiles(repoPathOf(m.tokenizer), '').chatTemplate, `${m.model}: its tokenizer_config.json has a chat template`).to.not.equal(null);
    }
    // cache-identity §1: every engine says what it serves (no unknown list: a candidate for every
    // model), and tokenizes its base model as the router does; adapters use their parent's.
    for (const { service, cfg } of allEngines()) {
      expect(cfg.servedModels.strict, `${service} --served_models`).to.equal(true);
      const entry = models.find((m) => m.model === cfg.servedModels.names[0]);
      expect(entry, `${service}'s base model ${cfg.servedModels.names[0]} in the models file`).to.not.equal(undefined);
      expect(cfg.tokenizerDir, `${service} --tokenizer`).to.equal(entry!.tokenizer);
    }
    const bases = new Set(allEngines().map((e) => e.cfg.servedModels.names[0]));
    expect(models.map((m) => m.model).sort(), 'models the file names that no engine serves').to.deep.equal([...bases].sort());
  });

  it('four engines: flags parse, named by their own service and hostname, heartbeating to the directory HTTP port', () => {
    const dir = directoryFlags();
    const list = engines();
    expect(list).to.have.length(4);
    const names = new Set<string>();
    for (const { service, cfg } of list) {
      expect(cfg.host, `${service} --name host`).to.equal(service);
      expect(services[service]!.hostname, `${service} hostname (its sockets bind to its name)`).to.equal(service);
      expect(names.has(cfg.instanceName), `${cfg.instanceName} unique`).to.equal(false);
      names.add(cfg.instanceName);
      expect(cfg.directoryUrl, `${service} --directory_http`).to.equal(`http://directory-svc:${dir.httpPort}`);
      expect(cfg.internalApiToken, `${service} --internal_api_token`).to.equal(dir.internalApiToken);
      expect((services[service]!.expose ?? []).map(String), `${service} exposes its HTTP port`).to.include(String(cfg.httpPort));
    }
  });

  it('discovery offsets, block size and topic match every engine\'s event and replay ports', () => {
    const d = kvEventsConfig().discovery!;
    for (const { service, cfg } of engines()) {
      expect(cfg.eventPortBase - cfg.httpPort, `${service} event offset`).to.equal(d.eventPortOffset);
      expect(cfg.replayPortBase - cfg.httpPort, `${service} replay offset`).to.equal(d.replayPortOffset);
      expect(cfg.blockSize, `${service} --block_size`).to.equal(d.blockSize);
      expect(cfg.topic, `${service} --topic`).to.equal(d.topic);
      expect(cfg.replayPortBase + cfg.dpSize - 1, `${service} last replay port`).to.be.at.most(65535);
    }
  });

  it('engines.md §4: the engines file validates and lists exactly the vLLM/SGLang-kind engine services at their url, ports and block size', () => {
    const dir = directoryFlags();
    expect(dir.enginesFile, 'an engines file is named').to.not.equal('');
    const listed = parseEnginesFile(readFileSync(repoPathOf(dir.enginesFile), 'utf8')).engines;
    const fileKind = allEngines().filter((e) => e.cfg.engineKind !== 'xllm');
    expect(fileKind.length, 'at least one vLLM-kind engine service').to.be.greaterThan(0);
    expect(listed.map((e) => e.name).sort()).to.deep.equal(fileKind.map((e) => e.service).sort());
    for (const { service, cfg } of fileKind) {
      const e = listed.find((x) => x.name === service)!;
      expect(services[service]!.hostname, `${service} hostname`).to.equal(service);
      expect(cfg.host, `${service} --name host`).to.equal(service);
      expect(e).to.deep.include({ url: `http://${service}:${cfg.httpPort}`, kind: cfg.engineKind, dpSize: cfg.dpSize, blockSize: cfg.blockSize, topic: cfg.topic });
      expect(e.eventEndpoint).to.equal(`tcp://${service}:${cfg.eventPortBase}`);
      expect(e.replayEndpoint).to.equal(`tcp://${service}:${cfg.replayPortBase}`);
      expect((services[service]!.expose ?? []).map(String), `${service} exposes its HTTP port`).to.include(String(cfg.httpPort));
      expect(services[service]!.ports ?? [], `${service} publishes nothing`).to.deep.equal([]);
    }
  });

  it('published ports: the directory\'s match its flags, the router publishes a range so --scale cannot collide, no host port is used twice', () => {
    const dir = directoryFlags();
    const dirPorts = portMappings('directory-svc');
    expect(dirPorts.map((p) => p.container).sort()).to.deep.equal([dir.grpcPort, dir.httpPort].sort());
    for (const p of dirPorts) expect(p.hostFrom === p.hostTo, `directory host port ${p.hostFrom} is one port`).to.equal(true);
    expect(healthcheckPort('directory-svc')).to.equal(dir.httpPort);

    const router = routerFlags();
    const routerPorts = portMappings('router-svc');
    expect(routerPorts.map((p) => p.container)).to.deep.equal([router.httpPort]);
    for (const p of routerPorts) expect(p.hostFrom === null || p.hostTo! > p.hostFrom, 'router host port is a range or left to Docker').to.equal(true);
    expect(healthcheckPort('router-svc')).to.equal(router.httpPort);

    const taken = new Map<number, string>();
    for (const name of Object.keys(services)) {
      for (const p of portMappings(name)) {
        if (p.hostFrom === null) continue;
        for (let port = p.hostFrom; port <= p.hostTo!; port++) {
          expect(taken.get(port), `host port ${port} of ${name}`).to.equal(undefined);
          taken.set(port, name);
        }
      }
    }
    for (const { service } of engines()) expect(services[service]!.ports ?? [], `${service} publishes nothing`).to.deep.equal([]);
  });

  it('depends_on names existing services and every named volume is declared', () => {
    for (const [name, svc] of Object.entries(services)) {
      const deps = Array.isArray(svc.depends_on) ? svc.depends_on : Object.keys(svc.depends_on ?? {});
      for (const d of deps) expect(services[d], `${name} depends on ${d}`).to.not.equal(undefined);
      for (const v of svc.volumes ?? []) {
        const source = v.split(':')[0]!;
        if (!source.startsWith('.') && !source.startsWith('/')) expect(compose.volumes ?? {}, `volume ${source}`).to.have.property(source);
      }
    }
  });
});
