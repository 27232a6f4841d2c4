// Free TCP ports for tests: never a fixed port. Ports are reserved per process so parallel
// helpers within one test run never get the same one twice.
import { createServer, type Server } from 'node:net';
import { isFetchBadPort } from '../../shared/http/fetch-bad-ports.js';

const handedOut = new Set<number>();

/**
 * One free port, below the ephemeral range like `freePortRange`: a port the kernel hands out for
 * `listen(0)` lies inside that range, where an outgoing connection can take it before the service
 * the test starts binds it (seen in CI: the local stack's directory failed to bind its gRPC port).
 */
export async function freePort(): Promise<number> {
  return freePortRange(1);
}

/**
 * Below Linux's ephemeral range (32768..60999 by default): a port picked inside it can be taken by
 * an outgoing connection between the check and the bind (seen under load: a simulator failed to
 * bind a port a client had just been handed).
 */
const RANGE_FIRST = 10000;
const RANGE_END = 32768;

/** `count` consecutive free ports (for base + dp_rank layouts); returns the first. */
export async function freePortRange(count: number): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = RANGE_FIRST + Math.floor(Math.random() * (RANGE_END - RANGE_FIRST));
    if (base + count > RANGE_END) continue;
    let ok = true;
    for (let i = 0; i < count && ok; i++) ok = !handedOut.has(base + i) && !isFetchBadPort(base + i) && (await isFree(base + i));
    if (ok) {
      for (let i = 0; i < count; i++) handedOut.add(base + i);
      return base;
    }
  }
  throw new Error(`no ${count} consecutive free ports found`);
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** Poll `fn` until it returns truthy or `timeoutMs` passes (event-driven waits where possible). */
export async function waitFor<T>(fn: () => T | Promise<T>, timeoutMs = 5000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Listens on 127.0.0.1:`port` (a port the test chose, e.g. to come back on after going down). */
export async function listenLoopback(server: Server, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
}
