/**
 * meta-svc's entry point as a real process (architecture.md "Processes and flags"): `--help`,
 * one stderr line and exit 2 for a bad flag, exit 1 when the Redis it names never answers,
 * its own `/health` and `/metrics`, and `--internal_api_token` on `/api/*`.
 *
 *   test ──spawn──▶ node --import tsx meta-svc/main.ts ──▶ SQLite file | (unreachable) Redis
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { MetaProcess } from '../helpers/meta-process.js';
import { runToCompletion, type CompletedRun } from '../helpers/run-cli.js';
import { freePort } from '../helpers/ports.js';

function runMain(args: string[]): Promise<CompletedRun> {
  return runToCompletion('meta-svc/main.ts', args);
}

describe('meta-svc main (node dist/meta-svc/main.js)', function () {
  this.timeout(60000);
  let dir: string;
  let proc: MetaProcess | null = null;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'meta-main-'));
  });
  afterEach(async () => {
    await proc?.kill();
    proc = null;
    rmSync(dir, { recursive: true, force: true });
  });

  it('--help prints every flag and exits 0', async () => {
    const r = await runMain(['--help']);
    expect(r.code).to.equal(0);
    expect(r.stdout).to.match(/^Usage: node dist\/meta-svc\/main\.js/);
    for (const f of ['--http_port', '--meta_config_file', '--meta_store', '--node_id', '--internal_api_token', '--log_level']) expect(r.stdout).to.include(`${f}=`);
  });

  it('a bad --meta_store or --http_port exits 2 with one line naming the flag', async () => {
    const bad = await runMain(['--meta_store=mysql://h:1']);
    expect(bad.code).to.equal(2);
    expect(bad.stderr.trim().split('\n')).to.deep.equal(['invalid --meta_store: "mysql://h:1" is not sqlite:<path> or redis://host:port[/db][?namespace=name]']);
    for (const v of ['redis://h', 'redis://h:0', 'redis://h:1/16', 'redis://h:1/0?namespace=a:b', 'sqlite:']) expect((await runMain([`--meta_store=${v}`])).code, v).to.equal(2);
    const port = await runMain(['--http_port=0']);
    expect(port.code).to.equal(2);
    expect(port.stderr.trim()).to.equal('invalid --http_port: expected an integer in 1..65535, got "0"');
  });

  it('a Redis that never answers is a start failure: one fatal log line naming it, exit 1', async () => {
    const r = await runMain([`--http_port=${await freePort()}`, `--meta_store=redis://127.0.0.1:${await freePort()}/0`]);
    expect(r.code).to.equal(1);
    const fatal = r.stdout.split('\n').filter((l) => l.includes('"level":60'));
    expect(fatal).to.have.length(1);
    expect(fatal[0]).to.match(/cannot reach redis:\/\/127\.0\.0\.1:\d+\/0/);
  });

  it('serves its own /health and /metrics; --internal_api_token guards /api/* only; SIGTERM exits 0', async () => {
    proc = await MetaProcess.start(join(dir, 'kvcm.db'), ['--internal_api_token=s3cret', '--node_id=meta-1']);
    expect(await (await fetch(`${proc.url}/health`)).json()).to.deep.equal({ status: 'ok' });
    expect(await (await fetch(`${proc.url}/metrics`)).text()).to.include('kvcm_http_requests_total');
    const refused = await fetch(`${proc.url}/api/getClusterInfo`, { method: 'POST', body: '{}' });
    expect(refused.status).to.equal(401);
    expect(await refused.text()).to.equal('{}');
    const ok = await fetch(`${proc.url}/api/getClusterInfo`, { method: 'POST', body: '{}', headers: { 'x-internal-token': 's3cret' } });
    expect(((await ok.json()) as { header: { status: { code: string } } }).header.status.code).to.equal('OK');
    expect(await proc.stop()).to.equal(0);
    proc = null;
  });
});
