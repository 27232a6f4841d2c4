/**
 * A real redis-server for the meta-svc Redis store suites (kvcm-meta §9.4; house rule: real
 * parts). Each server gets a free loopback port and persistence off (`--save ''`, no AOF), so
 * nothing outlives it; `stop()` + `start()` on the same port is the "Redis restarted" of R5 (an
 * empty Redis, since nothing was persisted — which is what a restart without persistence means).
 * `persistent` turns the append-only file on (fsync per write): then a restart keeps the data.
 */
import { mkdtempSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChildServer } from './child-server.js';
import { freePort } from './ports.js';

const REDIS_BIN = process.env['REDIS_SERVER_BIN'] ?? 'redis-server';
const START_TIMEOUT_MS = 10000;

export interface RedisServerOptions {
  /**
   * Keep data across `restart()`: an append-only file fsynced before every write is answered
   * (`appendfsync always`), so what Redis acknowledged survives a restart (meta chaos, issue 28).
   */
  readonly persistent?: boolean;
}

export class RedisServer extends ChildServer {

  private constructor(
    readonly port: number,
    dir: string,
    private readonly persistent: boolean,
  ) {
    super(dir);
  }

  /** Starts redis-server on a fresh free loopback port and waits until it answers PING. */
  static async start(opts: RedisServerOptions = {}): Promise<RedisServer> {
    return ChildServer.launched(async () => new RedisServer(await freePort(), mkdtempSync(join(tmpdir(), 'redis-test-')), opts.persistent === true));
  }

  /** `redis://127.0.0.1:P/db`, the form `--meta_store` takes. */
  url(db = 0): string {
    return `redis://127.0.0.1:${this.port}/${db}`;
  }

  protected async launch(): Promise<void> {
    await this.launchProcess(
      `redis-server on 127.0.0.1:${this.port}`,
      REDIS_BIN,
      [
        '--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--dir', this.dataDir, '--loglevel', 'warning', '--daemonize', 'no',
        ...(this.persistent ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']),
      ],
      () => answersPing(this.port),
      START_TIMEOUT_MS,
    );
  }
}

/** One raw RESP PING; no client library, so the helper does not depend on the code under test. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (d: Buffer) => done(d.toString('utf8').startsWith('+PONG')));
  });
}
