// Free TCP ports for tests: never a fixed port. Ports are reserved per process so parallel
// helpers within one test run never get the same one twice.
import type { Server } from 'node:net';
import { pickFreePorts } from '../../shared/net/loopback-ports.js';

const handedOut = new Set<number>();
/** Picks run one at a time: two concurrent picks could otherwise choose overlapping ranges. */
let picking: Promise<unknown> = Promise.resolve();

/** One free port, from below the ephemeral range (shared/net/loopback-ports.ts says why). */
export async function freePort(): Promise<number> {
  return freePortRange(1);
}

/** `count` consecutive free ports (for base + dp_rank layouts); returns the first. */
export async function freePortRange(count: number): Promise<number> {
  const pick = picking.then(async () => {
    const base = await pickFreePorts(count, handedOut);
    for (let i = 0; i < count; i++) handedOut.add(base + i);
    return base;
  });
  picking = pick.catch(() => undefined);
  return pick;
}

/** Node's code, and the text libzmq, redis and dnsmasq ("Address …") and etcd ("address …") log. */
const BIND_CONFLICT = /EADDRINUSE|address already in use/i;

/**
 * Runs `start` (which picks its own ports) again, up to `attempts` times in all, when it failed
 * because a port was taken between the pick and the child's bind: a pick only checks that a port
 * is free at that moment (seen in CI: a simulated engine's replay port, bound elsewhere meanwhile).
 * Any other failure is thrown at once.
 */
export async function startOnFreePorts<T>(start: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (e) {
      if (attempt >= attempts || !BIND_CONFLICT.test(e instanceof Error ? e.message : String(e))) throw e;
    }
  }
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
