import type * as zmq from 'zeromq';

/**
 * Keeps a receive pending on a socket at all times. zeromq.js only lets libzmq attach a
 * reconnected pipe (and resend SUB subscriptions) while an operation is pending, so a SUB
 * that is idle across a publisher restart never hears from the new process.
 */
export class Inbox {
  private readonly queue: Buffer[][] = [];
  private waiter: (() => void) | null = null;
  constructor(sock: zmq.Subscriber | zmq.Dealer) {
    void (async () => {
      try {
        for await (const m of sock) {
          this.queue.push(m);
          this.waiter?.();
        }
      } catch {
        // socket closed in afterEach
      }
    })();
  }
  async next(timeoutMs = 5000): Promise<Buffer[]> {
    const deadline = performance.now() + timeoutMs;
    while (this.queue.length === 0) {
      if (performance.now() > deadline) throw new Error(`no message within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        this.waiter = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
    return this.queue.shift() as Buffer[];
  }
}
