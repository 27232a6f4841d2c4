/**
 * A real DNS server for the engines.md §6 suites: Debian's dnsmasq on a free loopback port,
 * authoritative for one test domain (`--local`: a name it does not list is NXDOMAIN, never
 * forwarded), its A/AAAA records from an `--addn-hosts` file the test rewrites and reloads with
 * SIGHUP as pods come and go, SRV records from `--srv-host` (fixed for the server's life).
 *
 *   test ──setHosts()──▶ hosts file ──SIGHUP──▶ dnsmasq 127.0.0.1:P ◀── A/AAAA/SRV ── directory-svc --engines_dns_server
 */
import { mkdtempSync, chmodSync, writeFileSync } from 'node:fs';
import { promises as dnsPromises } from 'node:dns';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dnsAnswers, dnsmasqCommand, findDnsmasq, freeDnsPort, type SrvHost } from '../../tools/stack/stack-dns.js';
import { ChildServer } from './child-server.js';

const DNSMASQ_BIN = process.env['DNSMASQ_BIN'] ?? findDnsmasq() ?? 'dnsmasq';
const START_TIMEOUT_MS = 10000;
const RELOAD_TIMEOUT_MS = 5000;

/** name → addresses (IPv4 and IPv6 mix); a name without addresses is simply absent (NXDOMAIN). */
export type HostRecords = Readonly<Record<string, readonly string[]>>;

export type SrvRecord = SrvHost;

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
    return ChildServer.launched(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'dnsmasq-test-'));
      // dnsmasq may read the file after dropping privileges: make it readable whoever it runs as.
      chmodSync(dir, 0o755);
      const server = new DnsServer(await freeDnsPort(), opts.domain, dir, opts.hosts ?? {}, opts.srv ?? []);
      server.writeHosts();
      return server;
    });
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
    const cmd = dnsmasqCommand(DNSMASQ_BIN, this.port, this.hostsFile, this.domain, this.srv);
    await this.launchProcess(`dnsmasq on ${this.address}`, cmd.command, cmd.args, () => dnsAnswers(this.address, this.domain), START_TIMEOUT_MS);
  }

  private writeHosts(): void {
    const lines: string[] = [];
    for (const [name, list] of Object.entries(this.hosts)) for (const a of list) lines.push(`${a} ${name}`);
    writeFileSync(this.hostsFile, lines.join('\n') + '\n', { mode: 0o644 });
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
