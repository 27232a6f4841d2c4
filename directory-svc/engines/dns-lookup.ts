/**
 * The DNS edge of engines.md §6: one lookup of a DNS entry's name through Node's resolver
 * (`dns.promises.Resolver`, c-ares: the servers of /etc/resolv.conf, or `--engines_dns_server`),
 * turned into a `DnsOutcome` for the pure `DnsNameState`:
 *
 * - A and AAAA records of the name (both asked; IPv4 and IPv6 engines mix), or with `"srv": true`
 *   its SRV records, each target then resolved to its A/AAAA addresses with the record's port;
 * - NXDOMAIN and "no data" are an empty answer (`ENOTFOUND`, `ENODATA`);
 * - anything else (timeout, SERVFAIL, refused, connection refused) is a resolver error. One error
 *   in any query of the lookup makes the whole lookup an error: half an answer must not look like
 *   engines leaving.
 *
 * The resolver asks the name exactly as written (no search domains): write fully qualified names.
 */
import { promises as dnsPromises } from 'node:dns';
import type { DnsOutcome, DnsTarget } from './dns-resolution.js';

/** c-ares codes that mean "the name has no such records", not "the resolver failed". */
const EMPTY_CODES = new Set(['ENODATA', 'ENOTFOUND']);

export interface DnsLookupOptions {
  /** `--engines_dns_server` (`ip:port`, `[ipv6]:port`); null: the system resolver's servers. */
  readonly server: string | null;
  /** Each query's first timeout (c-ares backs off on the retry). */
  readonly timeoutMs: number;
  /** Tries per server before a query fails. */
  readonly tries: number;
}

/** What one query gave: addresses (or SRV records), nothing, or a failure. */
type QueryResult<T> = { readonly kind: 'ok'; readonly values: readonly T[] } | { readonly kind: 'empty'; readonly detail: string } | { readonly kind: 'error'; readonly code: string; readonly detail: string };

export class DnsLookup {
  private readonly resolver: dnsPromises.Resolver;

  constructor(opts: DnsLookupOptions) {
    this.resolver = new dnsPromises.Resolver({ timeout: opts.timeoutMs, tries: opts.tries });
    if (opts.server !== null) this.resolver.setServers([opts.server]);
  }

  /** The engines `name` stands for now; never rejects. */
  async lookup(name: string, srv: boolean): Promise<DnsOutcome> {
    if (!srv) return this.addresses(name);
    const records = await this.query(`SRV ${name}`, () => this.resolver.resolveSrv(name));
    if (records.kind !== 'ok') return records;
    const targets: DnsTarget[] = [];
    // Each distinct target once; its addresses pair with every port it is listed with.
    const ports = new Map<string, number[]>();
    for (const r of records.values) {
      const list = ports.get(r.name);
      if (list === undefined) ports.set(r.name, [r.port]);
      else list.push(r.port);
    }
    const answers = await Promise.all([...ports.keys()].map((target) => this.addresses(target)));
    let i = 0;
    for (const [, targetPorts] of ports) {
      const a = answers[i++]!;
      if (a.kind === 'error') return a;
      if (a.kind === 'empty') continue;
      for (const t of a.targets) for (const port of targetPorts) targets.push({ address: t.address, port });
    }
    return targets.length === 0 ? { kind: 'empty', detail: `SRV ${name}: no target has an address` } : { kind: 'records', targets };
  }

  /** Aborts every query in flight (they fail with ECANCELLED). */
  cancel(): void {
    this.resolver.cancel();
  }

  private async addresses(name: string): Promise<DnsOutcome> {
    const [v4, v6] = await Promise.all([
      this.query(`A ${name}`, () => this.resolver.resolve4(name)),
      this.query(`AAAA ${name}`, () => this.resolver.resolve6(name)),
    ]);
    if (v4.kind === 'error') return v4;
    if (v6.kind === 'error') return v6;
    const targets: DnsTarget[] = [];
    for (const r of [v4, v6]) if (r.kind === 'ok') for (const address of r.values) targets.push({ address, port: null });
    if (targets.length === 0) return { kind: 'empty', detail: `${v4.kind === 'empty' ? v4.detail : ''}; ${v6.kind === 'empty' ? v6.detail : ''}` };
    return { kind: 'records', targets };
  }

  private async query<T>(what: string, run: () => Promise<T[]>): Promise<QueryResult<T>> {
    try {
      const values = await run();
      return values.length === 0 ? { kind: 'empty', detail: `${what}: no records` } : { kind: 'ok', values };
    } catch (e) {
      const code = errorCode(e);
      if (EMPTY_CODES.has(code)) return { kind: 'empty', detail: `${what}: ${code === 'ENOTFOUND' ? 'NXDOMAIN' : 'no records'}` };
      return { kind: 'error', code, detail: `${what}: ${e instanceof Error ? e.message : String(e)}` };
    }
  }
}

function errorCode(e: unknown): string {
  if (typeof e === 'object' && e !== null && 'code' in e && typeof (e as { code: unknown }).code === 'string') return (e as { code: string }).code;
  return 'EUNKNOWN';
}
