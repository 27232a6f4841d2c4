/**
 * Every TCP port the stack will bind, checked before anything starts so a taken port fails with
 * one clear line naming the flag to change, instead of a child dying halfway through start-up.
 * Engines are laid out as discovery.md expects: engine i listens on its HTTP port `p_i`, rank r
 * publishes on `p_i + 10000 + r` and answers snapshots on `p_i + 30000 + r`; consecutive engines
 * are `dp_size` ports apart so no two ranges overlap.
 */
import { PlainMessageError } from '../../shared/errors/domain-error.js';
import { isFetchBadPort } from '../../shared/http/fetch-bad-ports.js';
import { EPHEMERAL_PORT_START, isTcpPortFree } from '../../shared/net/loopback-ports.js';
import type { EngineSpec } from './stack-flags.js';

/** discovery.md defaults; the directory's discovery config is written with the same numbers. */
export const EVENT_PORT_OFFSET = 10000;
export const REPLAY_PORT_OFFSET = 30000;

export interface PlannedEngine extends EngineSpec {
  /** The address it binds: 127.0.0.1, or 127.0.0.(2 + i) behind the stack's DNS name (engines.md §6). */
  readonly host: string;
  readonly httpPort: number;
}

export interface PlannedPort {
  readonly port: number;
  /** What binds it, for the error line (`--router_port`, `engine 2 events (rank 1)`). */
  readonly owner: string;
}

export class PortTakenError extends PlainMessageError {
  readonly class = 'port_taken' as const;
  constructor(readonly port: number, readonly owner: string) {
    super(`port ${port} (${owner}) is already in use: stop whatever holds it or choose another port with the flag`);
  }
}

/** Ports each engine binds, given its HTTP port. */
export function enginePorts(e: PlannedEngine, index: number): PlannedPort[] {
  const out: PlannedPort[] = [{ port: e.httpPort, owner: `--engine_base_port: engine ${index} HTTP` }];
  for (let r = 0; r < e.dpSize; r++) {
    out.push({ port: e.httpPort + EVENT_PORT_OFFSET + r, owner: `--engine_base_port: engine ${index} events (rank ${r})` });
    out.push({ port: e.httpPort + REPLAY_PORT_OFFSET + r, owner: `--engine_base_port: engine ${index} snapshots (rank ${r})` });
  }
  return out;
}

/** Each engine with its address and HTTP port; whatever else a spec carries (served models) stays on it. */
export function layoutEngines<E extends EngineSpec>(engines: readonly E[], basePort: number): (E & PlannedEngine)[] {
  let port = basePort;
  return engines.map((e) => {
    const planned = { ...e, host: '127.0.0.1', httpPort: port };
    port += Math.max(e.dpSize, 1);
    return planned;
  });
}

/**
 * `--engines_dns`: every engine on the same ports, engine i at 127.0.0.(2 + i), as pods of one
 * Deployment behind a headless Service (engines.md §6). Their ports are one engine's: check those.
 */
export function layoutDnsEngines<E extends EngineSpec>(engines: readonly E[], basePort: number): (E & PlannedEngine)[] {
  return engines.map((e, i) => dnsEngine(e, basePort, i));
}

/** Engine `i` of a DNS fleet (the demo adds one past the last). */
export function dnsEngine<E extends EngineSpec>(spec: E, basePort: number, i: number): E & PlannedEngine {
  return { ...spec, host: `127.0.0.${2 + i}`, httpPort: basePort };
}

/** Throws PortTakenError for the first port something else already listens on. */
export async function assertPortsFree(ports: readonly PlannedPort[]): Promise<void> {
  const seen = new Map<number, string>();
  for (const p of ports) {
    const other = seen.get(p.port);
    if (other !== undefined) throw new Error(`port ${p.port} is planned twice (${other} and ${p.owner}): change one of the port flags`);
    seen.set(p.port, p.owner);
    if (p.port > 65535) throw new Error(`port ${p.port} (${p.owner}) is above 65535: lower --engine_base_port`);
    if (isFetchBadPort(p.port)) throw new Error(`port ${p.port} (${p.owner}) is one fetch clients refuse to connect to (the Fetch standard's blocked ports): choose another port with the flag`);
    if (!(await isTcpPortFree(p.port))) throw new PortTakenError(p.port, p.owner);
  }
}

/** Above the privileged ports and the few well-known ones below 1100. */
const LOWEST_BASE = 1100;

/**
 * `--engine_base_port=0`: a base whose whole layout is free right now, avoiding `reserved` (the
 * stack's other ports). Random so two stacks started together rarely race for the same base.
 * All three ranges stay below Linux's ephemeral range (32768+): a port found free there can be
 * taken by any outgoing connection before the engine binds it (seen in CI as EADDRINUSE).
 */
export async function findFreeEngineBase(engines: readonly EngineSpec[], reserved: ReadonlySet<number>): Promise<number> {
  const span = engines.reduce((n, e) => n + e.dpSize, 0);
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = LOWEST_BASE + Math.floor(Math.random() * (EPHEMERAL_PORT_START - REPLAY_PORT_OFFSET - span - LOWEST_BASE));
    const ports = layoutEngines(engines, base).flatMap((e, i) => enginePorts(e, i));
    let ok = true;
    for (const p of ports) {
      if (reserved.has(p.port) || isFetchBadPort(p.port) || !(await isTcpPortFree(p.port))) {
        ok = false;
        break;
      }
    }
    if (ok) return base;
  }
  throw new Error('found no free port range for the engines: pass --engine_base_port');
}
