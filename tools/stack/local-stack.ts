/**
 * Starts the stack's processes in dependency order and stops them in reverse:
 *
 *   etcd (/health; xLLM engines only) or dnsmasq (--engines_dns) → directory-svc and meta-svc
 *   (GET /health 200) → engines ("engine simulator ready", registered in etcd, heartbeating to the
 *   directory; or listed in the engines file, or behind the DNS name) → router-svc (GET /ready 200:
 *   it opens its port only once it holds the directory's view)
 *
 * A vLLM/SGLang stack runs no etcd at all (engines.md §6): its directory runs with `--etcd_addr=`.
 * Every port is checked before the first process starts. Stopping sends SIGTERM to the router,
 * then the directory and meta-svc, then the engines (which revoke their leases while etcd is still up), then
 * etcd or dnsmasq, each with a SIGKILL fallback, so Ctrl-C leaves no process behind and every port free.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertPortsFree, dnsEngine, enginePorts, findFreeEngineBase, layoutDnsEngines, layoutEngines, type PlannedEngine, type PlannedPort } from './port-plan.js';
import {
  directoryCommand,
  engineCommand,
  metaCommand,
  etcdCommand,
  REPO_ROOT,
  routerCommand,
  writeDiscoveryConfig,
  writeDnsEnginesFile,
  writeEnginesFile,
  writeModelsFile,
  type Command,
} from './service-commands.js';
import { dnsAnswers, dnsHostsPath, dnsmasqCommand, ensureDnsmasq, freeDnsPort, stackDnsName, writeDnsHosts } from './stack-dns.js';
import { usesEtcd, type StackConfig, type StackEngine } from './stack-flags.js';
import { httpStatus, ServiceProcess } from '../../shared/process/service-process.js';

const ETCD_START_MS = 20000;
const DNS_START_MS = 10000;
/** tsx compiles the sources on first start; on a shared 2-core machine that takes a while. */
const SERVICE_START_MS = 90000;
/** The services' own stop deadline is 10 s; SIGKILL only after that. */
const STOP_GRACE_MS = 12000;
/** Lines kept in memory for readiness and failure messages; the log file has everything. */
const KEPT_LINES = 2000;
/** Lines of a dead child's log shown when the stack fails to start. */
export const TAIL_LINES = 20;

export class LocalStack {
  private readonly children: ServiceProcess[] = [];
  private ownsRunDir = false;
  /** Set by stop(): a start still in progress must not spawn anything stop() would miss. */
  private stopping = false;
  engines: readonly (StackEngine & PlannedEngine)[] = [];
  runDir = '';
  /** `--engines_dns`: the local dnsmasq (`127.0.0.1:P`), its name for the fleet and the addresses it lists. */
  dns: { readonly address: string; readonly name: string; addresses: readonly string[] } | null = null;

  constructor(
    private readonly cfg: StackConfig,
    private readonly print: (line: string) => void,
  ) {}

  get routerUrl(): string {
    return `http://127.0.0.1:${this.cfg.routerPort}`;
  }

  /** Throws with a clear message (port taken, a child that exits or never gets ready). */
  async start(): Promise<void> {
    const cfg = this.cfg;
    const fixed: PlannedPort[] = [
      ...(usesEtcd(cfg)
        ? [
            { port: cfg.etcdPort, owner: '--etcd_port' },
            { port: cfg.etcdPeerPort, owner: '--etcd_peer_port' },
          ]
        : []),
      { port: cfg.directoryGrpcPort, owner: '--directory_grpc_port' },
      { port: cfg.directoryHttpPort, owner: '--directory_http_port' },
      { port: cfg.routerPort, owner: '--router_port' },
    ];
    if (cfg.metaPort !== 0) fixed.push({ port: cfg.metaPort, owner: '--meta_port' });
    // A DNS fleet shares one engine's ports at different addresses: that layout is what must be free.
    const layout = cfg.enginesDns ? cfg.engines.slice(0, 1) : cfg.engines;
    const base = cfg.engineBasePort !== 0 ? cfg.engineBasePort : await findFreeEngineBase(layout, new Set(fixed.map((p) => p.port)));
    this.engines = cfg.enginesDns ? layoutDnsEngines(cfg.engines, base) : layoutEngines(cfg.engines, base);
    await assertPortsFree([...fixed, ...layoutEngines(layout, base).flatMap((e, i) => enginePorts(e, i))]);

    this.ownsRunDir = cfg.runDir === '';
    this.runDir = cfg.runDir !== '' ? cfg.runDir : mkdtempSync(join(tmpdir(), 'kv-stack-'));
    mkdirSync(join(this.runDir, 'logs'), { recursive: true });
    this.print(`[stack] run dir ${this.runDir} (logs in ${join(this.runDir, 'logs')})`);

    if (usesEtcd(cfg)) {
      const etcd = this.spawn('etcd', etcdCommand(cfg, join(this.runDir, 'etcd')));
      await etcd.waitUntil('etcd /health', () => etcdHealthy(cfg.etcdPort), ETCD_START_MS).catch((e: Error) => {
        if (etcd.exit?.code !== 127) throw e;
        throw new Error(`${e.message}\nno etcd binary "${cfg.etcdBin}": install Debian's etcd-server (npm start does it when run as root) or pass --etcd_bin`);
      });
    }
    if (cfg.enginesDns) await this.startDns();

    // Readiness by ports, not log lines, so any --log_level works. The directory opens its HTTP
    // port last (after gRPC and discovery); an engine opens /health just before registering.
    // vLLM/SGLang engines do not register in etcd: the directory reads them from an engines file
    // (one entry each, or one DNS entry for the whole fleet).
    const enginesFile =
      cfg.engineKind === 'xllm' ? null : this.dns !== null ? writeDnsEnginesFile(cfg, this.engines[0]!, this.dns.name, this.runDir) : writeEnginesFile(cfg, this.engines, this.runDir);
    const directory = this.spawn('directory', directoryCommand(cfg, writeDiscoveryConfig(cfg, this.runDir), enginesFile, this.dns));
    const directoryHealth = `http://127.0.0.1:${cfg.directoryHttpPort}/health`;
    // meta-svc depends on nothing else in the stack: it starts beside the directory.
    const meta = cfg.metaPort !== 0 ? this.spawn('meta', metaCommand(cfg, this.runDir)) : null;
    const metaHealth = `http://127.0.0.1:${cfg.metaPort}/health`;
    await Promise.all([
      directory.waitUntil(`GET ${directoryHealth} 200`, async () => (await httpStatus(directoryHealth)) === 200, SERVICE_START_MS),
      meta?.waitUntil(`GET ${metaHealth} 200`, async () => (await httpStatus(metaHealth)) === 200, SERVICE_START_MS),
    ]);

    await Promise.all(this.engines.map((e, i) => this.startEngine(e, i)));

    const router = this.spawn('router', routerCommand(cfg, writeModelsFile(cfg, this.runDir)));
    await router.waitUntil('GET /ready 200', async () => (await httpStatus(`${this.routerUrl}/ready`)) === 200, SERVICE_START_MS);
    // An engine that could not register (etcd) exits after its /health opened: say so here.
    const dead = this.exitedChild();
    if (dead !== undefined) throw new Error(`${dead.name} exited (code ${dead.exit?.code}, signal ${dead.exit?.signal}); last lines of its log:\n${dead.tail(TAIL_LINES)}`);
    this.print(`[stack] router ready at ${this.routerUrl}`);
  }

  /** Stops every child (reverse start order, engines together) and removes a temp run dir. */
  async stop(opts: { keepRunDir?: boolean } = {}): Promise<void> {
    this.stopping = true;
    const router = this.children.filter((c) => c.name === 'router');
    const directory = this.children.filter((c) => c.name === 'directory' || c.name === 'meta');
    const engines = this.children.filter((c) => c.name.startsWith('engine-'));
    const etcd = this.children.filter((c) => c.name === 'etcd' || c.name === 'dns');
    for (const group of [router, directory, engines, etcd]) {
      await Promise.all(group.map((c) => c.stop(STOP_GRACE_MS)));
    }
    this.print(`[stack] stopped ${this.children.length} processes`);
    if (this.ownsRunDir && opts.keepRunDir !== true) rmSync(this.runDir, { recursive: true, force: true });
    else if (this.runDir !== '') this.print(`[stack] logs kept in ${join(this.runDir, 'logs')}`);
  }

  /**
   * `--engines_dns`: one more engine on the fleet's port at the next loopback address, started and
   * answering `/health`, but not yet in DNS (`setDnsAddresses` publishes it).
   */
  async addDnsEngine(): Promise<StackEngine & PlannedEngine> {
    const engine = dnsEngine(this.engines[0]!, this.engines[0]!.httpPort, this.engines.length);
    this.engines = [...this.engines, engine];
    await this.startEngine(engine, this.engines.length - 1);
    return engine;
  }

  /** `--engines_dns`: rewrites the hosts file and sends dnsmasq SIGHUP (a pod came or went). */
  setDnsAddresses(addresses: readonly string[]): void {
    const dns = this.dns;
    const child = this.children.find((c) => c.name === 'dns');
    if (dns === null || child === undefined) throw new Error('no DNS server in this stack (--engines_dns)');
    writeDnsHosts(dnsHostsPath(this.runDir), dns.name, addresses);
    dns.addresses = [...addresses];
    child.signal('SIGHUP');
  }

  /** The dnsmasq process id (for `kill -HUP`), 0 without one. */
  get dnsPid(): number {
    return this.children.find((c) => c.name === 'dns')?.pid ?? 0;
  }

  private async startDns(): Promise<void> {
    const binary = ensureDnsmasq(this.print);
    const address = `127.0.0.1:${await freeDnsPort()}`;
    const name = stackDnsName(this.cfg.engineKind);
    const addresses = this.engines.map((e) => e.host);
    writeDnsHosts(dnsHostsPath(this.runDir), name, addresses);
    const dns = this.spawn('dns', dnsmasqCommand(binary, Number(address.split(':')[1]), dnsHostsPath(this.runDir)));
    await dns.waitUntil(`dnsmasq answering on ${address}`, () => dnsAnswers(address), DNS_START_MS);
    this.dns = { address, name, addresses };
  }

  private async startEngine(e: StackEngine & PlannedEngine, i: number): Promise<void> {
    const child = this.spawn(`engine-${i}`, engineCommand(this.cfg, e));
    const health = `http://${e.host}:${e.httpPort}/health`;
    await child.waitUntil(`GET ${health} 200`, async () => (await httpStatus(health)) === 200, SERVICE_START_MS);
  }

  /** A child that exited on its own while the stack runs (shown, and the stack stops). */
  exitedChild(): ServiceProcess | undefined {
    return this.children.find((c) => c.exit !== null);
  }

  private spawn(name: string, cmd: Command): ServiceProcess {
    if (this.stopping) throw new Error(`stack is stopping: ${name} not started`);
    const child = ServiceProcess.spawn({ name, command: cmd.command, args: cmd.args, cwd: REPO_ROOT, logFile: join(this.runDir, 'logs', `${name}.log`), keptLines: KEPT_LINES });
    this.children.push(child);
    this.print(`[stack] started ${name} (pid ${child.pid !== 0 ? child.pid : '?'})`);
    return child;
  }
}

async function etcdHealthy(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) });
    if (res.status !== 200) return false;
    const body = (await res.json()) as { health?: unknown };
    return body.health === 'true' || body.health === true;
  } catch {
    return false;
  }
}
