// Optional TLS on the directory's gRPC port (architecture.md "Processes and flags"): certificates
// generated with openssl into a temp dir per run (nothing committed), a real DirectoryGrpcServer,
// and the real clients that talk to it:
//
//   ViewClient (router) ─┐                      ┌─ --grpc_tls_cert/--grpc_tls_key (server TLS)
//   kvctl (child process) ┴─TLS / mTLS gRPC──▶ DirectoryGrpcServer ─┴─ --grpc_tls_ca (client certificates required)
//
// Bad flag combinations are checked twice: in process against the same reader the mains call,
// and through directory-svc, router-svc and kvctl as processes (one stderr line, exit 2).
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isConfigError } from '../../shared/config/config-error.js';
import { DEFAULT_STREAM_LIMITS } from '../../shared/config/kv-events-config.js';
import { createLogger, type Logger } from '../../shared/log/logger.js';
import { readClientTls, readServerTls, type TlsFlagValues } from '../../shared/security/tls-files.js';
import { Directory } from '../../directory-svc/directory.js';
import { DirectoryGrpcServer } from '../../directory-svc/grpc/directory-grpc-server.js';
import { ViewPublisher } from '../../directory-svc/view/view-publisher.js';
import { ViewClient } from '../../router-svc/viewcache/view-client.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { runToCompletion } from '../helpers/run-cli.js';
import { ServiceProcess } from '../../shared/process/service-process.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const TOKEN = 'tls-test-token-5d1e';

/** A CA, a server certificate for 127.0.0.1/localhost and a client certificate signed by it; a second, unrelated CA. */
interface Pki {
  readonly dir: string;
  readonly ca: string;
  readonly otherCa: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  /** A key that belongs to no certificate here. */
  readonly strayKey: string;
  readonly notPem: string;
}

function makePki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), 'grpc-tls-'));
  const p = (name: string): string => join(dir, name);
  const ssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=kv-test-ca');
  ssl('req', '-x509', ...ec, '-keyout', 'other-ca.key', '-out', 'other-ca.pem', '-days', '2', '-subj', '/CN=kv-other-ca');
  writeFileSync(p('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  writeFileSync(p('client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const [name, cn] of [
    ['server', 'directory'],
    ['client', 'router'],
  ] as const) {
    ssl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
    ssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`);
  }
  ssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', 'stray.key');
  writeFileSync(p('not-pem.txt'), 'this is not a certificate\n');
  return {
    dir,
    ca: p('ca.pem'),
    otherCa: p('other-ca.pem'),
    serverCert: p('server.pem'),
    serverKey: p('server.key'),
    clientCert: p('client.pem'),
    clientKey: p('client.key'),
    strayKey: p('stray.key'),
    notPem: p('not-pem.txt'),
  };
}

const NONE: TlsFlagValues = { grpcTlsCert: '', grpcTlsKey: '', grpcTlsCa: '' };

/** The one-line message a reader throws for `flags` (fails the test when it does not throw a ConfigError). */
function refusal(read: (f: TlsFlagValues) => unknown, flags: Partial<TlsFlagValues>): string {
  try {
    read({ ...NONE, ...flags });
  } catch (e) {
    if (isConfigError(e)) return e.message;
    throw e;
  }
  throw new Error(`accepted ${JSON.stringify(flags)}`);
}

describe('gRPC TLS between the directory and its clients', function () {
  this.timeout(90_000);
  let pki: Pki;
  let lines: string[] = [];
  let log: Logger;
  let closers: Array<() => Promise<void> | void> = [];

  before(() => {
    pki = makePki();
  });

  after(() => {
    rmSync(pki.dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    lines = [];
    log = createLogger('tls-test', 'debug', { write: (s: string) => void lines.push(s) });
  });

  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  /** A directory (view publisher, no streams) whose gRPC port uses the TLS files of `flags`. */
  async function directory(flags: Partial<TlsFlagValues>, token = ''): Promise<number> {
    const view = new ViewPublisher({ flushIntervalMs: 10 });
    closers.push(() => view.close());
    const disabled = Directory.disabled(() => Promise.reject(new Error('no streams')), DEFAULT_STREAM_LIMITS);
    closers.push(() => disabled.close());
    const tls = readServerTls({ ...NONE, ...flags });
    const server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory: disabled, view, tls, internalApiToken: token, logger: log });
    closers.push(() => server.close(500));
    return server.port;
  }

  function viewClient(port: number, id: string, flags: Partial<TlsFlagValues> | null, token?: string): ViewClient {
    const c = ViewClient.start({
      directoryAddrs: [{ host: 'localhost', port }],
      routerId: id,
      staleAfterMs: 3000,
      backoffBaseMs: 50,
      backoffMaxMs: 200,
      tls: flags === null ? null : readClientTls({ ...NONE, ...flags }),
      ...(token === undefined ? {} : { internalApiToken: token }),
      logger: log.child({ router: id }),
    });
    closers.push(() => c.close());
    return c;
  }

  /** Resolves once router `id` has logged a lost stream (the handshake or the call failed). */
  async function refused(id: string): Promise<void> {
    await waitFor(() => lines.some((l) => l.includes('view: stream lost') && l.includes(`"router":"${id}"`)), 20_000, `${id} refused`);
  }

  it('server TLS: the router view client with --grpc_tls_ca gets its snapshot; a plaintext client and one trusting another CA never do', async () => {
    const port = await directory({ grpcTlsCert: pki.serverCert, grpcTlsKey: pki.serverKey });
    const trusted = viewClient(port, 'trusted', { grpcTlsCa: pki.ca });
    const plain = viewClient(port, 'plain', null);
    const stranger = viewClient(port, 'stranger', { grpcTlsCa: pki.otherCa });
    await trusted.whenReady();
    await refused('plain');
    await refused('stranger');
    expect(trusted.cache.needsSnapshot).to.equal(false);
    expect(plain.cache.needsSnapshot).to.equal(true);
    expect(stranger.cache.needsSnapshot).to.equal(true);
  });

  it('mutual TLS: with --grpc_tls_ca on the directory a client certificate it signed connects; a client without one is refused', async () => {
    const port = await directory({ grpcTlsCert: pki.serverCert, grpcTlsKey: pki.serverKey, grpcTlsCa: pki.ca }, TOKEN);
    const withCert = viewClient(port, 'with-cert', { grpcTlsCa: pki.ca, grpcTlsCert: pki.clientCert, grpcTlsKey: pki.clientKey }, TOKEN);
    const noCert = viewClient(port, 'no-cert', { grpcTlsCa: pki.ca }, TOKEN);
    await withCert.whenReady();
    await refused('no-cert');
    expect(noCert.cache.needsSnapshot).to.equal(true);

    const addr = `--directory_addr=localhost:${port}`;
    const tlsFlags = [`--grpc_tls_ca=${pki.ca}`, `--grpc_tls_cert=${pki.clientCert}`, `--grpc_tls_key=${pki.clientKey}`];
    const ok = await runToCompletion('tools/kvctl.ts', ['stats', addr, ...tlsFlags, `--internal_api_token=${TOKEN}`, '--json']);
    expect(ok.code, ok.stderr).to.equal(0);
    expect(ok.stderr).to.equal('');
    expect(JSON.parse(ok.stdout)).to.have.property('view_epoch');
    // TLS does not replace the token: a certified client without it is still refused.
    const noToken = await runToCompletion('tools/kvctl.ts', ['stats', addr, ...tlsFlags]);
    expect(noToken.code).to.equal(1);
    expect(noToken.stderr).to.equal(`kvctl: GetStats on localhost:${port}: UNAUTHENTICATED: invalid internal token\n`);
    const uncertified = await runToCompletion('tools/kvctl.ts', ['stats', addr, `--grpc_tls_ca=${pki.ca}`, `--internal_api_token=${TOKEN}`, '--timeout_ms=3000']);
    expect(uncertified.code).to.equal(1);
    expect(uncertified.stderr, JSON.stringify(uncertified.stderr)).to.match(/^kvctl: GetStats on localhost:\d+: (UNAVAILABLE|DEADLINE_EXCEEDED): .*\n$/);
  });

  it('flag combinations and files are checked at startup: pairs, the server CA needs a certificate, a client certificate needs a CA, unreadable, non-PEM and mismatched files', () => {
    const server = (f: Partial<TlsFlagValues>): string => refusal(readServerTls, f);
    const client = (f: Partial<TlsFlagValues>): string => refusal(readClientTls, f);
    expect(readServerTls(NONE)).to.equal(null);
    expect(readClientTls(NONE)).to.equal(null);
    expect(server({ grpcTlsCert: pki.serverCert })).to.equal('invalid --grpc_tls_key: required with --grpc_tls_cert');
    expect(server({ grpcTlsKey: pki.serverKey })).to.equal('invalid --grpc_tls_cert: required with --grpc_tls_key');
    expect(server({ grpcTlsCa: pki.ca })).to.equal('invalid --grpc_tls_ca: requiring client certificates needs --grpc_tls_cert and --grpc_tls_key too');
    expect(server({ grpcTlsCert: pki.serverCert, grpcTlsKey: join(pki.dir, 'missing.key') })).to.equal(`invalid --grpc_tls_key: cannot read ${join(pki.dir, 'missing.key')} (ENOENT)`);
    expect(server({ grpcTlsCert: pki.notPem, grpcTlsKey: pki.serverKey })).to.equal(`invalid --grpc_tls_cert: ${pki.notPem} is not a PEM file`);
    expect(server({ grpcTlsCert: pki.serverCert, grpcTlsKey: pki.strayKey })).to.match(/^invalid --grpc_tls_key: .*key values mismatch/);
    expect(client({ grpcTlsCert: pki.clientCert, grpcTlsKey: pki.clientKey })).to.equal('invalid --grpc_tls_cert: a client certificate needs --grpc_tls_ca to verify the directory');
    expect(client({ grpcTlsCa: pki.ca, grpcTlsKey: pki.clientKey })).to.equal('invalid --grpc_tls_cert: required with --grpc_tls_key');
    expect(client({ grpcTlsCa: pki.dir })).to.equal(`invalid --grpc_tls_ca: cannot read ${pki.dir} (EISDIR)`);
    const ok = readClientTls({ grpcTlsCa: pki.ca, grpcTlsCert: pki.clientCert, grpcTlsKey: pki.clientKey });
    expect(ok?.cert).to.be.instanceOf(Buffer);
  });

  it('directory-svc, router-svc and kvctl exit 2 with one stderr line naming the flag for a bad TLS combination or file', async () => {
    const missing = join(pki.dir, 'nope.pem');
    const cases: ReadonlyArray<readonly [string, readonly string[], string]> = [
      ['directory-svc/main.ts', [`--grpc_tls_cert=${pki.serverCert}`], 'invalid --grpc_tls_key: required with --grpc_tls_cert\n'],
      ['directory-svc/main.ts', [`--grpc_tls_ca=${pki.ca}`], 'invalid --grpc_tls_ca: requiring client certificates needs --grpc_tls_cert and --grpc_tls_key too\n'],
      ['router-svc/main.ts', [`--grpc_tls_ca=${missing}`], `invalid --grpc_tls_ca: cannot read ${missing} (ENOENT)\n`],
      ['router-svc/main.ts', [`--grpc_tls_cert=${pki.clientCert}`, `--grpc_tls_key=${pki.clientKey}`], 'invalid --grpc_tls_cert: a client certificate needs --grpc_tls_ca to verify the directory\n'],
      ['tools/kvctl.ts', ['stats', `--grpc_tls_ca=${pki.ca}`, `--grpc_tls_key=${pki.clientKey}`], 'kvctl: invalid --grpc_tls_cert: required with --grpc_tls_key\n'],
    ];
    for (const [entry, args, line] of cases) {
      const r = await runToCompletion(entry, args);
      expect({ code: r.code, stderr: r.stderr }, `${entry} ${args.join(' ')}`).to.deep.equal({ code: 2, stderr: line });
    }
  });

  it('directory-svc as a process serves TLS from its flags: kvctl with the CA answers; with a token and no TLS it warns once', async () => {
    const grpcPort = await freePort();
    const args = [`--grpc_port=${grpcPort}`, `--http_port=${await freePort()}`, `--etcd_addr=127.0.0.1:${await freePort()}`];
    const dir = ServiceProcess.spawn({ name: 'directory-svc', entry: 'directory-svc/main.ts', args: [...args, `--grpc_tls_cert=${pki.serverCert}`, `--grpc_tls_key=${pki.serverKey}`], cwd: ROOT });
    closers.push(async () => {
      await dir.stop();
    });
    await dir.waitForLog((l) => l['msg'] === 'directory-svc started', 30_000, 'directory started');
    const out = dir.linesOf('stdout').join('\n');
    expect(out).to.include('"tls":"server"');
    expect(out).to.not.include('crosses the network readable');
    const stats = await runToCompletion('tools/kvctl.ts', ['stats', `--directory_addr=localhost:${grpcPort}`, `--grpc_tls_ca=${pki.ca}`, '--json']);
    expect(stats.code, stats.stderr).to.equal(0);
    expect(JSON.parse(stats.stdout)).to.have.property('directory_enabled', false);

    // The warning: same directory flags on other ports, a token, no TLS.
    const plainPort = await freePort();
    const plainArgs = [`--grpc_port=${plainPort}`, `--http_port=${await freePort()}`, `--etcd_addr=127.0.0.1:${await freePort()}`, `--internal_api_token=${TOKEN}`];
    const plain = ServiceProcess.spawn({ name: 'directory-svc (plaintext)', entry: 'directory-svc/main.ts', args: plainArgs, cwd: ROOT });
    closers.push(async () => {
      await plain.stop();
    });
    await plain.waitForLog((l) => l['msg'] === 'directory-svc started', 30_000, 'plaintext directory started');
    const plainOut = plain.linesOf('stdout').join('\n');
    const warnings = plain.linesOf('stdout').filter((l) => l.includes('--internal_api_token is set but gRPC is plaintext'));
    expect(warnings).to.have.length(1);
    expect(plainOut).to.not.include(TOKEN);
  });
});
