/**
 * Picking a loopback port to hand to a process that binds it later (the tests' services, the local
 * stack's engines and dnsmasq, the benchmarks' directories). Never from Linux's ephemeral range
 * (32768..60999 by default), where `listen(0)` ports come from: an outgoing connection can take
 * such a port between the check and the bind (seen in CI: the local stack's directory failed to
 * bind its gRPC port, a simulator its port).
 */
import { createServer } from 'node:net';
import { isFetchBadPort } from '../http/fetch-bad-ports.js';

/** First port of Linux's default ephemeral range (net.ipv4.ip_local_port_range). */
export const EPHEMERAL_PORT_START = 32768;
/** The range picked from: [PICK_PORT_FIRST, PICK_PORT_END), below the ephemeral range. */
export const PICK_PORT_FIRST = 10000;
export const PICK_PORT_END = EPHEMERAL_PORT_START;

/** A random port of the pick range with room for `count` consecutive ports from it. */
function randomPickPort(count = 1): number {
  return PICK_PORT_FIRST + Math.floor(Math.random() * (PICK_PORT_END - PICK_PORT_FIRST - count + 1));
}

/**
 * Whether a TCP listener can bind `port` now on 127.0.0.1 and on the wildcard address (a listener
 * on either makes the port unusable for the other); the probes are closed before this resolves.
 */
export async function isTcpPortFree(port: number): Promise<boolean> {
  return (await canBind(port, '127.0.0.1')) && (await canBind(port, '0.0.0.0'));
}

function canBind(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/**
 * The first of `count` consecutive ports of the pick range, each free now (TCP, and `alsoFree` when
 * given: dnsmasq also needs UDP), none in `avoid` (ports handed out, not bound yet) nor one fetch
 * clients refuse, for a process that binds them later.
 */
export async function pickFreePorts(count = 1, avoid: ReadonlySet<number> = new Set(), alsoFree?: (port: number) => Promise<boolean>): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = randomPickPort(count);
    let ok = true;
    for (let port = base; port < base + count && ok; port++) {
      ok = !avoid.has(port) && !isFetchBadPort(port) && (await isTcpPortFree(port)) && (alsoFree === undefined || (await alsoFree(port)));
    }
    if (ok) return base;
  }
  throw new Error(`no ${count} consecutive free loopback port(s) found in 200 attempts`);
}
