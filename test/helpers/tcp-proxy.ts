/**
 * A small TCP forwarder for fault injection (style guide: faults through a TCP proxy, not sleeps):
 * listens on a fixed port chosen by the test, pipes each connection to `target`, and can stop
 * listening and cut every open connection (`down`) and come back on the same port (`up`), so a
 * client configured with this port sees its server vanish and return.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { listenLoopback } from './ports.js';

export class TcpProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();

  constructor(
    readonly port: number,
    private readonly targetPort: number,
    private readonly targetHost = '127.0.0.1',
  ) {}

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Starts listening on `port` (no-op when already up). */
  async up(): Promise<void> {
    if (this.server !== null) return;
    const server = createServer((client) => {
      const upstream = createConnection(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.once('close', () => this.sockets.delete(s));
        s.on('error', () => undefined); // a cut connection is the point, not a failure
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
    });
    await listenLoopback(server, this.port);
    this.server = server;
  }

  /** Stops listening and cuts every connection through it. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
