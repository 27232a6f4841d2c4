/**
 * A TCP forwarder in front of one engine's HTTP port that breaks proxied requests the way a pod
 * that just died does (style guide: faults through a TCP proxy, not sleeps). Connections whose
 * first bytes are not `POST ` (the directory's `GET /health` and `/metrics` scrapes) always pass,
 * so only the router's forwarded requests meet the fault:
 *
 *   router ──POST /v1/completions──▶ HttpFaultProxy :port ──▶ engine
 *                                     pass | reset_before_answer | reset_after_first_chunk
 *   refuse(): nothing listens on :port any more (ECONNREFUSED for everyone)
 *
 * `reset_before_answer` resets the connection (RST) once the request arrived, before any byte of
 * the engine's answer; `reset_after_first_chunk` relays the engine's first chunk (the response
 * head) and resets at the next one, so the router has already relayed the head.
 *
 * The fault is read when a connection starts, and the router keeps connections alive: `set` cuts
 * every open connection, so the next request opens a new one and meets the new fault (and `posts`
 * counts requests, one per connection).
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { listenLoopback } from './ports.js';

export type HttpFault = 'pass' | 'reset_before_answer' | 'reset_after_first_chunk';

export class HttpFaultProxy {
  private fault: HttpFault = 'pass';
  /** Connections that started with a POST (one request each after `set`). */
  posts = 0;
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();

  private constructor(
    readonly port: number,
    private readonly targetPort: number,
  ) {}

  /** Listens on `port` (a free one chosen by the caller), forwarding to 127.0.0.1:`targetPort`. */
  static async start(port: number, targetPort: number): Promise<HttpFaultProxy> {
    const p = new HttpFaultProxy(port, targetPort);
    await p.listen();
    return p;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * The fault for the connections that start from now on; the open ones are cut first (the
   * router's idle keep-alive sockets among them) and the peer in this process gets a moment to see
   * them closed, so its next request opens a new connection.
   */
  async set(fault: HttpFault): Promise<void> {
    this.fault = fault;
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => setTimeout(r, 50));
  }

  /** Stops listening: new connections are refused. */
  async refuse(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
    await new Promise((r) => setTimeout(r, 50));
  }

  async close(): Promise<void> {
    await this.refuse();
  }

  private async listen(): Promise<void> {
    const server = createServer((client) => this.accept(client));
    await listenLoopback(server, this.port);
    this.server = server;
  }

  private track(s: Socket): void {
    this.sockets.add(s);
    s.once('close', () => this.sockets.delete(s));
    s.on('error', () => undefined); // a cut connection is the point, not a failure
  }

  private accept(client: Socket): void {
    this.track(client);
    client.once('data', (first: Buffer) => {
      const post = first.subarray(0, 5).toString('latin1') === 'POST ';
      if (post) this.posts++;
      const fault = post ? this.fault : 'pass';
      if (fault === 'reset_before_answer') {
        client.resetAndDestroy();
        return;
      }
      const upstream = createConnection(this.targetPort, '127.0.0.1');
      this.track(upstream);
      upstream.write(first);
      client.pipe(upstream);
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
      if (fault === 'pass') {
        upstream.pipe(client);
        return;
      }
      let chunks = 0;
      upstream.on('data', (chunk: Buffer) => {
        if (chunks++ === 0) {
          client.write(chunk);
          return;
        }
        upstream.destroy();
        client.resetAndDestroy();
      });
    });
  }
}
