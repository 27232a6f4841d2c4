/**
 * Picking a loopback port to hand to a process that binds it later (the tests' services, the local
 * stack's dnsmasq). Never from Linux's ephemeral range (32768..60999 by default), where `listen(0)`
 * ports come from: an outgoing connection can take such a port between the check and the bind
 * (seen in CI: the local stack's directory failed to bind its gRPC port, a simulator its port).
 */
import { createServer } from 'node:net';

/** The range picked from: [PICK_PORT_FIRST, PICK_PORT_END), below the ephemeral range. */
export const PICK_PORT_FIRST = 10000;
export const PICK_PORT_END = 32768;

/** A random port of the pick range with room for `count` consecutive ports from it. */
export function randomPickPort(count = 1): number {
  return PICK_PORT_FIRST + Math.floor(Math.random() * (PICK_PORT_END - PICK_PORT_FIRST - count + 1));
}

/** Whether a TCP listener can bind 127.0.0.1:`port` now (it is closed again before this resolves). */
export function isTcpPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}
