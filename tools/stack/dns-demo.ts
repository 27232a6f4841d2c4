/**
 * The `--engines_dns` part of the stack's demo (engines.md §6): the fleet grows and shrinks the
 * way a Deployment behind a headless Service does, and the stack prints what the directory sees
 * (its `ListInstances`, as `kvctl instances` shows it) after each step:
 *
 *   1. the engines the DNS name resolves to now, each `dns:<name>`;
 *   2. a new engine starts at the next loopback address, its address is added to the hosts file
 *      and dnsmasq reloaded (SIGHUP): the directory lists it at its next lookup;
 *   3. the first address is removed the same way: the directory drops that engine (its process
 *      keeps running, as a terminating pod would for a moment, but nothing routes to it).
 */
import type { WireViewInstance } from '../../shared/view/view-wire.js';
import { DirectoryClient } from '../kvctl/directory-client.js';
import type { LocalStack } from './local-stack.js';

/** Every step settles within a few lookups (1 s each) plus the engine's first scrape. */
const STEP_TIMEOUT_MS = 30000;
const POLL_MS = 200;

export interface DnsDemoOptions {
  readonly directoryGrpcPort: number;
  readonly internalApiToken: string;
  readonly print: (line: string) => void;
}

export async function runDnsDemo(stack: LocalStack, opts: DnsDemoOptions): Promise<void> {
  const dns = stack.dns;
  if (dns === null) throw new Error('the DNS demo needs --engines_dns');
  const client = new DirectoryClient({ addresses: [{ host: '127.0.0.1', port: opts.directoryGrpcPort }], internalApiToken: opts.internalApiToken, timeoutMs: 5000 });
  const source = `dns:${dns.name}`;
  const fromDns = async (): Promise<WireViewInstance[]> => (await client.listInstances()).instances.filter((i) => i.source === source);
  const show = async (what: string): Promise<void> => {
    const rows = await fromDns();
    opts.print(`[dns] ${what}: the directory lists ${rows.length} engines from ${source}`);
    for (const i of rows) opts.print(`    ${i.name.padEnd(21)} ${i.state.padEnd(8)} url ${i.url}`);
  };
  const until = async (what: string, done: (names: readonly string[]) => boolean): Promise<number> => {
    const started = performance.now();
    for (;;) {
      if (done((await fromDns()).map((i) => i.name))) return Math.round(performance.now() - started);
      if (performance.now() - started > STEP_TIMEOUT_MS) throw new Error(`dns demo: ${what} not seen within ${STEP_TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  };
  try {
    opts.print(`[dns] ${dns.name} resolves through dnsmasq at ${dns.address} (hosts file ${stack.runDir}/dns-hosts; edit it, then kill -HUP ${stack.dnsPid})`);
    await show('now');

    const added = await stack.addDnsEngine();
    const addedName = `${added.host}:${added.httpPort}`;
    opts.print(`[dns] an engine starts at ${added.host}; its address is added to the hosts file and dnsmasq reloaded (SIGHUP)`);
    stack.setDnsAddresses([...dns.addresses, added.host]);
    const joinedMs = await until(`${addedName} joining`, (names) => names.includes(addedName));
    await show(`${addedName} joined after ${joinedMs} ms`);

    const gone = dns.addresses[0]!;
    const goneName = `${gone}:${added.httpPort}`;
    opts.print(`[dns] ${gone} is removed from the hosts file and dnsmasq reloaded`);
    stack.setDnsAddresses(dns.addresses.filter((a) => a !== gone));
    const leftMs = await until(`${goneName} leaving`, (names) => !names.includes(goneName));
    await show(`${goneName} left after ${leftMs} ms`);
  } finally {
    client.close();
  }
}
