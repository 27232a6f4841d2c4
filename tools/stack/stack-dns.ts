/**
 * `npm start -- --engine_kind=vllm --engines_dns` (engines.md §6): a local DNS server for the
 * stack's engines, as a Kubernetes headless Service would be. Debian's dnsmasq (package
 * `dnsmasq-base`, installed on demand when run as root) on a free loopback port answers for one
 * name from a hosts file in the run dir; the stack rewrites the file and sends SIGHUP when an
 * engine address is added or removed, and the directory sees it at its next lookup.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { promises as dnsPromises } from 'node:dns';
import { createSocket } from 'node:dgram';
import { join } from 'node:path';
import { pickFreePorts } from '../../shared/net/loopback-ports.js';
import type { Command } from './service-commands.js';
import { REPO_ROOT } from './service-commands.js';

/** The zone the stack's dnsmasq answers for alone (`--local`): other names are NXDOMAIN, never forwarded. */
export const STACK_DNS_DOMAIN = 'kv-stack.test';

/** The name the engines file's DNS entry resolves (`vllm.kv-stack.test`). */
export function stackDnsName(engineKind: string): string {
  return `${engineKind}.${STACK_DNS_DOMAIN}`;
}

/** The hosts file dnsmasq reads (`--addn-hosts`): one `<address> <name>` line per engine. */
export function writeDnsHosts(path: string, name: string, addresses: readonly string[]): void {
  writeFileSync(path, addresses.map((a) => `${a} ${name}`).join('\n') + '\n', { mode: 0o644 });
}

export function dnsHostsPath(runDir: string): string {
  return join(runDir, 'dns-hosts');
}

/** dnsmasq's path: on PATH, or Debian's /usr/sbin (not on a normal user's PATH); null when missing. */
export function findDnsmasq(): string | null {
  if (spawnSync('sh', ['-c', 'command -v dnsmasq'], { stdio: 'ignore' }).status === 0) return 'dnsmasq';
  return existsSync('/usr/sbin/dnsmasq') ? '/usr/sbin/dnsmasq' : null;
}

/**
 * dnsmasq's path, installing Debian's `dnsmasq-base` first when it is missing (through
 * scripts/setup.mjs, as `npm start` installs etcd). Throws with the command to run otherwise.
 */
export function ensureDnsmasq(print: (line: string) => void): string {
  const found = findDnsmasq();
  if (found !== null) return found;
  print('[stack] dnsmasq missing: installing Debian\'s dnsmasq-base (scripts/setup.mjs --dnsmasq --packages-only)');
  execFileSync(process.execPath, [join(REPO_ROOT, 'scripts', 'setup.mjs'), '--dnsmasq', '--packages-only'], { stdio: 'inherit' });
  const installed = findDnsmasq();
  if (installed === null) throw new Error('no dnsmasq binary: install Debian\'s dnsmasq-base (sudo apt-get install -y dnsmasq-base)');
  return installed;
}

/** An SRV record dnsmasq serves (`--srv-host`): fixed for its life, unlike the hosts file. */
export interface SrvHost {
  readonly name: string;
  readonly target: string;
  readonly port: number;
}

/**
 * dnsmasq answering for `domain` alone on 127.0.0.1:`port`: A/AAAA from `hostsFile` (re-read on
 * SIGHUP), SRV from `srv`, NXDOMAIN for any other name of the domain, nothing forwarded.
 */
export function dnsmasqCommand(binary: string, port: number, hostsFile: string, domain = STACK_DNS_DOMAIN, srv: readonly SrvHost[] = []): Command {
  return {
    command: binary,
    args: [
      '--keep-in-foreground',
      '--log-facility=-',
      '--no-resolv',
      '--no-hosts',
      `--addn-hosts=${hostsFile}`,
      `--local=/${domain}/`,
      '--no-negcache',
      '--listen-address=127.0.0.1',
      '--bind-interfaces',
      `--port=${port}`,
      '--pid-file=',
      // Keep the starting user, so the run dir's hosts file stays readable.
      '--user=root',
      ...srv.map((s) => `--srv-host=${s.name},${s.target},${s.port}`),
    ],
  };
}

/** Whether dnsmasq at `address` answers (records or NXDOMAIN) for `domain`. */
export async function dnsAnswers(address: string, domain = STACK_DNS_DOMAIN): Promise<boolean> {
  const r = new dnsPromises.Resolver({ timeout: 300, tries: 1 });
  r.setServers([address]);
  try {
    await r.resolve4(`probe.${domain}`);
    return true;
  } catch (e) {
    const code = (e as { code?: string }).code;
    return code === 'ENOTFOUND' || code === 'ENODATA';
  }
}

/**
 * A loopback port free for UDP (what resolvers use) and TCP (dnsmasq binds both), from below the
 * ephemeral range (shared/net/loopback-ports.ts says why).
 */
export function freeDnsPort(): Promise<number> {
  return pickFreePorts(1, new Set(), isUdpPortFree);
}

function isUdpPortFree(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const s = createSocket('udp4');
    s.once('error', () => resolve(false));
    s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}
