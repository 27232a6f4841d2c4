/**
 * A real etcd for integration tests (house rule: real parts, never the default 2379). Each server
 * gets two free ports and a fresh temp data dir; `restart()` stops it and starts it again on the
 * same ports and data, so "etcd restarted" scenarios see the same keys (leases keep running on
 * the server's own clock).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChildServer } from './child-server.js';
import { freePort } from './ports.js';

const ETCD_BIN = process.env['ETCD_BIN'] ?? 'etcd';
const START_TIMEOUT_MS = 15000;

export class EtcdServer extends ChildServer {

  private constructor(
    readonly clientPort: number,
    readonly peerPort: number,
    dataDir: string,
  ) {
    super(dataDir);
  }

  /** Starts etcd on fresh free ports and waits until it answers `/health`. */
  static async start(): Promise<EtcdServer> {
    return ChildServer.launched(async () => new EtcdServer(await freePort(), await freePort(), mkdtempSync(join(tmpdir(), 'etcd-test-'))));
  }

  /** `127.0.0.1:P`, the form `--etcd_addr` takes. */
  get address(): string {
    return `127.0.0.1:${this.clientPort}`;
  }

  get clientUrl(): string {
    return `http://${this.address}`;
  }

  protected async launch(): Promise<void> {
    const client = `http://127.0.0.1:${this.clientPort}`;
    const peer = `http://127.0.0.1:${this.peerPort}`;
    await this.launchProcess(
      `etcd on ${client}`,
      ETCD_BIN,
      [
        '--data-dir', this.dataDir,
        '--name', 'default',
        '--listen-client-urls', client,
        '--advertise-client-urls', client,
        '--listen-peer-urls', peer,
        '--initial-advertise-peer-urls', peer,
        '--initial-cluster', `default=${peer}`,
        '--log-level', 'error',
      ],
      () => isHealthy(client),
      START_TIMEOUT_MS,
    );
  }
}

async function isHealthy(clientUrl: string): Promise<boolean> {
  try {
    const res = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(500) });
    if (res.status !== 200) return false;
    const body = (await res.json()) as { health?: unknown };
    return body.health === 'true' || body.health === true;
  } catch {
    return false;
  }
}
