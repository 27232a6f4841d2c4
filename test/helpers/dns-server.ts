/**
 * A real DNS server for the engines.md §6 suites: Debian's dnsmasq on a free loopback port,
 * authoritative for one test domain (`--local`: a name it does not list is NXDOMAIN, never
 * forwarded), its A/AAAA records from an `--addn-hosts` file the test rewrites and reloads with
 * SIGHUP as pods come and go, SRV records from `--srv-host` (fixed for the server's life).
 *
 *   test ──setHosts()──▶ hosts file ──SIGHUP──▶ dnsmasq 127.0.0.1:P ◀── A/AAAA/SRV ── directory-svc --engines_dns_server
 */
import { existsSync, mkdtempSync, chmodSync, writeFileSync } from 'node:fs';
import { createSocket } from 'node:dgram';
import { promises as dnsPromises } from 'node:dns';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChildServer } from './child-server.js';
import { freePort } from './ports.js';

const DNSMASQ_BIN = process.env['DNSMASQ_BIN'] ?? (existsSync('/usr/sbin/dnsmasq') ? '/usr/sbin/dnsmasq' : 'dnsmasq');
const START_TIMEOUT_MS = 10000;
const RELOAD_TIMEOUT_MS = 5000;

/** name → addresses (IPv4 and IPv6 mix); a name without addresses is simply absent (NXDOMAIN). */
export type HostRecords = Readonly<Record<string, readonly string[]>>;

export interface SrvRecord {
  readonly name: string;
  readonly target: string;
  readonly port: number;
}

export class DnsServer extends ChildServer {
  private hosts: HostRecords;

  private constructor(
    readonly port: number,
    readonly domain: string,
    dataDir: string,
    hosts: HostRecords,
    private readonly srv: readonly SrvRecord[],
  ) {
    super(dataDir);
    this.hosts = hosts;
  }

  /** dnsmasq on a free port, answering for `domain` from `hosts` (and `srv`). */
  static async start(opts: { domain: string; hosts?: HostRecords; srv?: readonly SrvRecord[] }): Promise<DnsServer> {
    const dir = mkdtempSync(join(tmpdir(), 'dnsmasq-test-'));
    // dnsmasq may read the file after dropping privileges: make it readable whoever it runs as.
    chmodSync(dir, 0o755);
    const server = new DnsServer(await freeUdpAndTcpPort(), opts.domain, dir, opts.hosts ?? {}, opts.srv ?? []);
    server.writeHosts();
    return ChildServer.launched(server);
  }

  /** `127.0.0.1:P`, the form `--engines_dns_server` takes. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  private get hostsFile(): string {
    return join(this.dataDir, 'hosts');
  }

  /**
   * Rewrites the hosts file and sends SIGHUP; resolves once the server answers the new records
   * (every name of the old and the new set, A and AAAA), so a test never races the reload.
   */
  async setHosts(hosts: HostRecords): Promise<void> {
    const names = new Set([...Object.keys(this.hosts), ...Object.keys(hosts)]);
    this.hosts = hosts;
    this.writeHosts();
    this.proc!.signal('SIGHUP');
    const resolver = this.resolver();
    await this.proc!.waitUntil(
      'dnsmasq reloaded its hosts file',
      async () => {
        for (const name of names) {
          const got = [...(await addresses(resolver, 'resolve4', name)), ...(await addresses(resolver, 'resolve6', name))].sort();
          if (got.join() !== [...(hosts[name] ?? [])].sort().join()) return false;
        }
        return true;
      },
      RELOAD_TIMEOUT_MS,
    );
  }

  /** A resolver asking this server only (tests check answers directly). */
  resolver(): dnsPromises.Resolver {
    const r = new dnsPromises.Resolver({ timeout: 500, tries: 1 });
    r.setServers([this.address]);
    return r;
  }

  protected async launch(): Promise<void> {
    const args = [
      '--keep-in-foreground',
      '--log-facility=-',
      // Only the test's records: no /etc/hosts, no upstream servers, nothing outside the domain.
      '--no-resolv',
      '--no-hosts',
      `--addn-hosts=${this.hostsFile}`,
      `--local=/${this.domain}/`,
      '--no-negcache',
      '--listen-address=127.0.0.1',
      '--bind-interfaces',
      `--port=${this.port}`,
      '--pid-file=',
      // Keep the privileges it starts with, so the temp hosts file stays readable.
      '--user=root',
      ...this.srv.map((s) => `--srv-host=${s.name},${s.target},${s.port}`),
    ];
    const resolver = this.resolver();
    await this.launchProcess(`dnsmasq on ${this.address}`, DNSMASQ_BIN, args, () => answers(resolver, this.domain), START_TIMEOUT_MS);
  }

  private writeHosts(): void {
    const lines: string[] = [];
    for (const [name, list] of Object.entries(this.hosts)) for (const a of list) lines.push(`${a} ${name}`);
    writeFileSync(this.hostsFile, lines.join('\n') + '\n', { mode: 0o644 });
  }
}

/** A query got an answer (records or NXDOMAIN): the server is up. */
async function answers(resolver: dnsPromises.Resolver, domain: string): Promise<boolean> {
  try {
    await resolver.resolve4(`probe.${domain}`);
    return true;
  } catch (e) {
    const code = (e as { code?: string }).code;
    return code === 'ENOTFOUND' || code === 'ENODATA';
  }
}

async function addresses(resolver: dnsPromises.Resolver, query: 'resolve4' | 'resolve6', name: string): Promise<string[]> {
  try {
    return await resolver[query](name);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') return [];
    throw e;
  }
}

/** A port free for TCP (freePort) and for UDP, which is what resolvers use. */
async function freeUdpAndTcpPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await freePort();
    const ok = await new Promise<boolean>((resolve) => {
      const s = createSocket('udp4');
      s.once('error', () => resolve(false));
      s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (ok) return port;
  }
  throw new Error('no port free for both UDP and TCP');
}
