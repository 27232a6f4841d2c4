// Free TCP ports for tests: never a fixed port. Ports are reserved per process so parallel
// helpers within one test run never get the same one twice.
import type { Server } from 'node:net';
import { pickFreePorts } from '../../shared/net/loopback-ports.js';

const handedOut = new Set<number>();

/** One free port, from below the ephemeral range (shared/net/loopback-ports.ts says why). */
export async function freePort(): Promise<number> {
  return freePortRange(1);
}

/** `count` consecutive free ports (for base + dp_rank layouts); returns the first. */
export async function freePortRange(count: number): Promise<number> {
  const base = await pickFreePorts(count, handedOut);
  for (let i = 0; i < count; i++) handedOut.add(base + i);
  return base;
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
