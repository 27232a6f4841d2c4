// engines.md §6 E15–E18 end to end over real processes: simulated vLLM engines sharing one port at
// different 127.x.y.z loopback addresses, Debian's dnsmasq answering for their DNS name from a hosts
// file the test rewrites and reloads (SIGHUP) as pods come and go, a directory-svc with one DNS
// entry in its engines file and no etcd (--etcd_addr=), and, for E18, a router.
//
//   dnsmasq 127.0.0.1:P ◀── A/AAAA every 1 s ── directory-svc --engines_dns_server --etcd_addr= ──gRPC──▶ test / router
//   SimProcess 127.a.b.1..4:p ◀── /health /metrics /kv_event_sources, SUB/DEALER ──┘
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { DnsServer } from '../helpers/dns-server.js';
import { FLEET_BLOCK_SIZE, FleetDirectory, SimProcess, type SimOptions } from '../helpers/engines-fleet.js';
import { freePortRange, waitFor } from '../helpers/ports.js';
import { RouterProcess } from '../helpers/router-stack.js';
import { stopAllProcesses } from '../../shared/process/service-process.js';

const DOMAIN = 'fleet.test';
const NAME = `vllm.${DOMAIN}`;
/** The smallest `--engines_dns_refresh_ms` (engines.md §6: 1000..600000). */
const DNS_REFRESH_MS = 1000;

/** A loopback /24 of its own per run, so parallel runs on one machine never share an address. */
const NET = `127.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
const addr = (i: number): string => `${NET}.${i}`;

/** Prompt i: 8 tokens (two blocks of 4), distinct per engine. */
const tokens = (i: number): number[] => Array.from({ length: 8 }, (_, k) => 100 * (i + 1) + k);

describe('engines.md §6 engines found through DNS (dnsmasq, real processes)', function () {
  this.timeout(180000);
  let dns: DnsServer | null = null;
  let dir: FleetDirectory | null = null;
  let router: RouterProcess | null = null;

  afterEach(async () => {
    await router?.stop();
    router = null;
    await dir?.close();
    dir = null;
    await stopAllProcesses();
    await dns?.destroy();
    dns = null;
  });

  /** Engines on `port` at the given addresses (started together). */
  function engines(port: number, hosts: readonly string[], opts: SimOptions = {}): Promise<SimProcess[]> {
    return Promise.all(hosts.map((h) => SimProcess.start(`vllm@${h}`, { ...opts, host: h, port })));
  }

  function dnsEntry(port: number, over: Record<string, unknown> = {}): Record<string, unknown> {
    return { dns: NAME, port, kind: 'vllm', role: 'DEFAULT', block_size: FLEET_BLOCK_SIZE, event_port: port + 1, replay_port: port + 2, ...over };
  }

  async function directory(entries: unknown[]): Promise<FleetDirectory> {
    return FleetDirectory.start(entries, { etcdAddr: '', args: [`--engines_dns_server=${dns!.address}`, `--engines_dns_refresh_ms=${DNS_REFRESH_MS}`] });
  }

  /** Names of the DNS engines the directory lists, sorted. */
  async function listed(): Promise<string[]> {
    return (await dir!.instances()).filter((i) => i.source === `dns:${NAME}`).map((i) => i.name).sort();
  }

  /** Sends prompt `i` to the engine until the directory credits it on some rank (a PUB drops what it sends before the SUB joins). */
  async function credit(e: SimProcess, i: number): Promise<void> {
    let nextAt = 0;
    await waitFor(async () => {
      if (performance.now() >= nextAt) {
        nextAt = performance.now() + 500;
        await (await e.complete(tokens(i))).text();
      }
      return (await deviceHits(e.address, i)) === 8;
    }, 30000, `credit for ${e.address}`);
  }

  /** The best rank's device hits for prompt i on an engine; -1 when it has no synchronized stream. */
  async function deviceHits(name: string, i: number): Promise<number> {
    const m = (await dir!.matches(tokens(i), name)).filter((x) => x.synchronized);
    return m.length === 0 ? -1 : Math.max(...m.map((x) => x.device_hit_tokens));
  }

  /** When the directory logged the DNS answer that first gave `engines` engines, epoch ms. */
  function answerChangedAt(engines: number, after: number): number | null {
    const line = dir!.proc.logLines.find((l) => l['msg'] === 'DNS answer changed' && l['engines'] === engines && Date.parse(String(l['time'])) >= after);
    return line === undefined ? null : Date.parse(String(line['time']));
  }

  it('E15 a DNS name with three addresses becomes three engines with credit; a fourth address joins within two refresh periods; one removed leaves and its credit is gone', async () => {
    const port = await freePortRange(3);
    dns = await DnsServer.start({ domain: DOMAIN, hosts: { [NAME]: [addr(1), addr(2), addr(3)] } });
    const [e1, e2, e3] = await engines(port, [addr(1), addr(2), addr(3)]);
    dir = await directory([dnsEntry(port)]);
    await waitFor(async () => (await listed()).length === 3, 30000, 'three engines');
    expect(await listed()).to.deep.equal([e1!.address, e2!.address, e3!.address].sort());
    const i1 = (await dir.instance(e1!.address))!;
    expect(i1).to.deep.include({ url: `http://${e1!.address}`, backend_type: 'vllm', source: `dns:${NAME}` });
    // Streams are planned by the reconciler's next pass after the instance is listed.
    await waitFor(async () => (await dir!.streams(e1!.address)).length > 0, 10000, 'e1 streams planned');
    expect((await dir.streams(e1!.address)).map((s) => [s.endpoint, s.replay_endpoint])).to.deep.equal([[`tcp://${addr(1)}:${port + 1}`, `tcp://${addr(1)}:${port + 2}`]]);
    for (const [i, e] of [e1!, e2!, e3!].entries()) await credit(e, i);

    const [e4] = await engines(port, [addr(4)]);
    const reloadedAt = Date.now();
    await dns.setHosts({ [NAME]: [addr(1), addr(2), addr(3), addr(4)] });
    await waitFor(async () => (await listed()).includes(e4!.address), 2 * DNS_REFRESH_MS + 5000, 'the fourth engine listed');
    const seenAt = answerChangedAt(4, reloadedAt);
    expect(seenAt, 'the directory logged the answer with four engines').to.not.equal(null);
    // Two periods, plus a little for the lookup itself on a busy machine.
    expect(seenAt! - reloadedAt, 'the fourth address seen within two refresh periods').to.be.at.most(2 * DNS_REFRESH_MS + 500);
    await credit(e4!, 3);

    await dns.setHosts({ [NAME]: [addr(1), addr(3), addr(4)] });
    await waitFor(async () => !(await listed()).includes(e2!.address), 2 * DNS_REFRESH_MS + 5000, 'the removed engine gone');
    // Its streams go on the reconciler's next pass (--engines_refresh_interval_ms).
    await waitFor(async () => (await dir!.matches(tokens(1), e2!.address)).length === 0, 5000, 'no stream, no credit');
    expect(await dir.streams(e2!.address)).to.deep.equal([]);
    expect(await deviceHits(e1!.address, 0), 'the others keep theirs').to.equal(8);
    expect(await deviceHits(e4!.address, 3)).to.equal(8);
  });

  it('E16 a resolver outage keeps the fleet; one empty answer does not empty it, two do', async () => {
    const port = await freePortRange(3);
    dns = await DnsServer.start({ domain: DOMAIN, hosts: { [NAME]: [addr(1), addr(2), addr(3)] } });
    const fleet = await engines(port, [addr(1), addr(2), addr(3)]);
    const names = fleet.map((e) => e.address).sort();
    dir = await directory([dnsEntry(port)]);
    await waitFor(async () => (await listed()).length === 3, 30000, 'three engines');
    await credit(fleet[0]!, 0);

    await dns.stop();
    const errors = async (): Promise<number> => {
      const m = new RegExp(`^kv_engines_dns_errors_total\\{name="${NAME.replace(/\./g, '\\.')}"\\} (\\d+)`, 'm').exec(await dir!.metricsText());
      return m === null ? 0 : Number(m[1]);
    };
    await waitFor(async () => (await errors()) >= 3, 10 * DNS_REFRESH_MS, 'three failed lookups');
    expect(await listed(), 'the fleet stays through the outage').to.deep.equal(names);
    expect((await dir.instances()).every((i) => i.state === 'ACTIVE')).to.equal(true);
    expect(await deviceHits(fleet[0]!.address, 0)).to.equal(8);
    const failures = dir.proc.logLines.filter((l) => l['msg'] === 'DNS lookup failed; the last good set of engines stays');
    expect(failures.length, 'one log line per distinct error').to.be.lessThan(await errors());

    await dns.restart();
    const emptiedFrom = Date.now();
    await dns.setHosts({});
    await dir.proc.waitForLog((l) => l['msg'] === 'DNS name has no records; its engines stay until the next answer agrees', 5 * DNS_REFRESH_MS, 'one empty answer held');
    // The next lookup is a period away: the set is still the old one now.
    expect(answerChangedAt(0, emptiedFrom)).to.equal(null);
    expect(await listed(), 'one empty answer does not empty it').to.deep.equal(names);
    await waitFor(async () => (await listed()).length === 0, 5 * DNS_REFRESH_MS, 'two empty answers empty it');
    expect(answerChangedAt(0, emptiedFrom)).to.not.equal(null);
  });

  it('E17 endpoints from /kv_event_sources (two DP ranks, wildcard host) win over the entry\'s ports; an engine without it uses the ports', async () => {
    // One port layout for both: HTTP p; the entry's ports p+1.. (events) and p+3.. (replay), where
    // the engine without the route publishes; the other publishes at p+5.. and p+7.. and says so.
    const port = await freePortRange(9);
    dns = await DnsServer.start({ domain: DOMAIN, hosts: { [NAME]: [addr(1), addr(2)] } });
    const [served] = await engines(port, [addr(1)], { dpSize: 2, eventOffset: 5 });
    const [plain] = await engines(port, [addr(2)], { dpSize: 2, eventOffset: 1, args: ['--no_kv_event_sources'] });
    dir = await directory([dnsEntry(port, { dp_size: 2, event_port: port + 1, replay_port: port + 3 })]);
    await waitFor(async () => (await dir!.streams()).length === 4, 30000, 'four streams');
    const endpoints = async (e: SimProcess): Promise<string[][]> => (await dir!.streams(e.address)).map((s) => [String(s.dp_rank), s.endpoint, s.replay_endpoint]);
    expect(await endpoints(served!)).to.deep.equal([
      ['0', `tcp://${addr(1)}:${port + 5}`, `tcp://${addr(1)}:${port + 7}`],
      ['1', `tcp://${addr(1)}:${port + 6}`, `tcp://${addr(1)}:${port + 8}`],
    ]);
    expect(await endpoints(plain!)).to.deep.equal([
      ['0', `tcp://${addr(2)}:${port + 1}`, `tcp://${addr(2)}:${port + 3}`],
      ['1', `tcp://${addr(2)}:${port + 2}`, `tcp://${addr(2)}:${port + 4}`],
    ]);
    // Both ranks of both engines synchronize and credit what their engine holds.
    for (const [i, e] of [served!, plain!].entries()) {
      await credit(e, 2 * i);
      await credit(e, 2 * i + 1);
      const ranks = await dir.matches(tokens(2 * i), e.address);
      expect(ranks.map((m) => m.synchronized)).to.deep.equal([true, true]);
    }
  });

  it('E18 --etcd_addr= with only DNS engines: no etcd process, no etcd connection, full routing (a router gets credit)', async () => {
    const port = await freePortRange(3);
    dns = await DnsServer.start({ domain: DOMAIN, hosts: { [NAME]: [addr(1), addr(2)] } });
    const fleet = await engines(port, [addr(1), addr(2)]);
    dir = await directory([dnsEntry(port)]);
    await waitFor(async () => (await listed()).length === 2, 30000, 'two engines');
    const listing = await dir.listInstances();
    expect(listing).to.deep.include({ etcd_connected: false, etcd_disabled: true });
    expect(dir.proc.logLines.some((l) => l['msg'] === '--etcd_addr is empty: no etcd discovery (engines file and DNS only)')).to.equal(true);
    expect(dir.proc.logLines.filter((l) => /etcd/i.test(String(l['msg'])) && l['level'] !== 30), 'no etcd warning or error').to.deep.equal([]);
    const health = (await (await fetch(`http://127.0.0.1:${dir.httpPort}/health`)).json()) as Record<string, unknown>;
    expect(health).to.deep.include({ status: 'ok', etcd_enabled: false, etcd_connected: false, instances: 2 });
    // Not one socket of the directory towards etcd's port, in any state.
    const sockets = execFileSync('ss', ['-tanpH'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes(`pid=${dir!.proc.pid},`));
    expect(sockets.filter((l) => /:2379\s/.test(l))).to.deep.equal([]);

    router = await RouterProcess.start(`127.0.0.1:${dir.grpcPort}`, ['--load_balance_policy=CAR', '--log_level=warn'], { name: 'router' });
    const send = async (): Promise<{ instance: string | null; cached: number }> => {
      const res = await fetch(`${router!.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: tokens(0), max_tokens: 1 }) });
      const body = (await res.json()) as { usage?: { prompt_tokens_details?: { cached_tokens: number } } };
      return { instance: res.headers.get('x-kv-router-instance'), cached: res.status === 200 ? (body.usage?.prompt_tokens_details?.cached_tokens ?? 0) : -1 };
    };
    const first = await waitFor(async () => {
      const r = await send();
      return r.cached >= 0 ? r : null;
    }, 20000, 'routed 200');
    expect(fleet.map((e) => e.address)).to.include(first.instance);
    await waitFor(async () => (await deviceHits(first.instance!, 0)) === 8, 20000, 'the routed prompt credited in the directory');
    // The router's own view credits that engine with the prompt, and CAR picks it for it.
    const route = async (): Promise<{ prefill: { name: string }; candidates: { instance_name: string; hit_tokens: number; queue_cost: number }[] }> =>
      (await (await fetch(`${router!.url}/v1/route`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token_ids: tokens(0), dry_run: true }) })).json()) as never;
    const credited = await waitFor(async () => {
      const r = await route();
      // Idle queues too: a load report scraped while the first request ran can outweigh 8 tokens of credit.
      const idle = r.candidates.every((c) => c.queue_cost === 0);
      return idle && r.candidates.find((c) => c.instance_name === first.instance && c.hit_tokens === 8) !== undefined ? r : null;
    }, 20000, 'the router credits the engine holding the prompt, both queues idle');
    expect(credited.prefill.name).to.equal(first.instance);
    expect(credited.candidates.filter((c) => c.instance_name !== first.instance).map((c) => c.hit_tokens)).to.deep.equal([0]);
    const second = await send();
    expect(second.instance).to.equal(first.instance);
    expect(second.cached).to.equal(8);
  });
});
