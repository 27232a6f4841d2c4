// engines.md §6, the DNS edge against a real DNS server (Debian's dnsmasq on a free loopback
// port): A and AAAA records of a name, SRV records with each target's own port, NXDOMAIN as an
// empty answer, a refused query and a server that is down as resolver errors; then the watcher
// over the same server as the hosts file is rewritten and reloaded (SIGHUP).
//
//   DnsLookup / DnsWatcher ──UDP──▶ dnsmasq 127.0.0.1:P (--addn-hosts, --srv-host, --local=/fleet.test/)
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { DnsLookup } from '../../directory-svc/engines/dns-lookup.js';
import { DnsWatcher } from '../../directory-svc/engines/dns-watcher.js';
import { parseEnginesFile } from '../../directory-svc/engines/engines-file.js';
import type { DnsOutcome } from '../../directory-svc/engines/dns-resolution.js';
import { DnsServer } from '../helpers/dns-server.js';
import { waitFor } from '../helpers/ports.js';

const DOMAIN = 'fleet.test';

function addresses(o: DnsOutcome): string[] {
  if (o.kind !== 'records') throw new Error(`expected records, got ${JSON.stringify(o)}`);
  return o.targets.map((t) => (t.port === null ? t.address : `${t.address}#${t.port}`)).sort();
}

describe('engines.md §6 DNS lookups against dnsmasq', function () {
  this.timeout(30000);
  let dns: DnsServer | null = null;
  let watcher: DnsWatcher | null = null;

  afterEach(async () => {
    await watcher?.close();
    watcher = null;
    await dns?.destroy();
    dns = null;
  });

  it('E15 A and AAAA records of a name, SRV targets with their own ports, NXDOMAIN and "no data" as empty answers', async () => {
    dns = await DnsServer.start({
      domain: DOMAIN,
      hosts: { [`vllm.${DOMAIN}`]: ['127.0.0.2', '127.0.0.3', '::1'], [`t1.${DOMAIN}`]: ['127.0.0.4'], [`t2.${DOMAIN}`]: ['127.0.0.5'] },
      srv: [
        { name: `_http._tcp.srv.${DOMAIN}`, target: `t1.${DOMAIN}`, port: 8001 },
        { name: `_http._tcp.srv.${DOMAIN}`, target: `t1.${DOMAIN}`, port: 8002 },
        { name: `_http._tcp.srv.${DOMAIN}`, target: `t2.${DOMAIN}`, port: 8001 },
        { name: `_http._tcp.dangling.${DOMAIN}`, target: `gone.${DOMAIN}`, port: 8001 },
      ],
    });
    const lookup = new DnsLookup({ server: dns.address, timeoutMs: 500, tries: 1 });
    expect(addresses(await lookup.lookup(`vllm.${DOMAIN}`, false))).to.deep.equal(['127.0.0.2', '127.0.0.3', '::1']);
    expect(addresses(await lookup.lookup(`_http._tcp.srv.${DOMAIN}`, true))).to.deep.equal(['127.0.0.4#8001', '127.0.0.4#8002', '127.0.0.5#8001']);
    const nx = await lookup.lookup(`nope.${DOMAIN}`, false);
    expect(nx).to.deep.equal({ kind: 'empty', detail: `A nope.${DOMAIN}: NXDOMAIN; AAAA nope.${DOMAIN}: NXDOMAIN` });
    expect((await lookup.lookup(`vllm.${DOMAIN}`, true)).kind, 'no SRV records under an A name').to.equal('empty');
    expect((await lookup.lookup(`_http._tcp.dangling.${DOMAIN}`, true)).kind, 'SRV whose target has no address').to.equal('empty');
  });

  it('E16 a refused query and a server that is down are resolver errors, not empty answers', async () => {
    dns = await DnsServer.start({ domain: DOMAIN, hosts: { [`vllm.${DOMAIN}`]: ['127.0.0.2'] } });
    const lookup = new DnsLookup({ server: dns.address, timeoutMs: 300, tries: 1 });
    const refused = await lookup.lookup('vllm.elsewhere.test', false);
    expect(refused).to.deep.include({ kind: 'error', code: 'EREFUSED' });
    await dns.stop();
    const down = await lookup.lookup(`vllm.${DOMAIN}`, false);
    expect(down.kind).to.equal('error');
    expect(['ECONNREFUSED', 'ETIMEOUT']).to.include(down.kind === 'error' ? down.code : '');
  });

  it('E15 E16 the watcher follows a rewritten hosts file, holds one empty answer, counts errors per name while the server is down', async () => {
    dns = await DnsServer.start({ domain: DOMAIN, hosts: { [`vllm.${DOMAIN}`]: ['127.0.0.2', '127.0.0.3'] } });
    const entry = parseEnginesFile(JSON.stringify({ engines: [{ dns: `vllm.${DOMAIN}`, port: 8000, kind: 'vllm', block_size: 4, event_port: 8001 }] })).dnsEntries[0]!;
    let changes = 0;
    const registry = new Registry();
    watcher = new DnsWatcher({ refreshMs: 60000, server: dns.address, onChange: () => changes++ });
    watcher.registerMetrics(registry);
    watcher.setEntries([entry]);
    const current = (): string[] => watcher!.targets(entry).map((t) => t.address);
    const metric = async (name: string): Promise<number | undefined> => {
      const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
      return m?.values.find((v) => v.labels['name'] === `vllm.${DOMAIN}`)?.value;
    };

    await watcher.resolveNow();
    expect(current()).to.deep.equal(['127.0.0.2', '127.0.0.3']);
    expect(await metric('kv_engines_dns_engines')).to.equal(2);
    await dns.setHosts({ [`vllm.${DOMAIN}`]: ['127.0.0.2', '127.0.0.3', '127.0.0.4'] });
    await watcher.resolveNow();
    expect(current()).to.deep.equal(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    expect(changes).to.equal(2);

    await dns.setHosts({});
    await watcher.resolveNow();
    expect(current(), 'one empty answer').to.deep.equal(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    await dns.setHosts({ [`vllm.${DOMAIN}`]: ['127.0.0.2'] });
    await watcher.resolveNow();
    expect(current()).to.deep.equal(['127.0.0.2']);

    await dns.stop();
    await watcher.resolveNow();
    await watcher.resolveNow();
    expect(current(), 'the last good set while the server is down').to.deep.equal(['127.0.0.2']);
    expect(await metric('kv_engines_dns_errors_total')).to.equal(2);
    await dns.restart();
    await dns.setHosts({});
    await watcher.resolveNow();
    expect(current()).to.deep.equal(['127.0.0.2']);
    await watcher.resolveNow();
    await waitFor(() => current().length === 0, 1000, 'two empty answers empty the set');
    expect(await metric('kv_engines_dns_engines')).to.equal(0);
  });
});
