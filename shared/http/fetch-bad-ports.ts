/**
 * The ports the Fetch standard's "bad port" list blocks above 1023 (https://fetch.spec.whatwg.org/#port-blocking).
 * Node's fetch (undici) refuses them with "fetch failed" before connecting, so an engine or a
 * service on one cannot be probed or proxied to by a fetch client (seen: a stack engine on 2049).
 * Port pickers skip them; the privileged ones below 1024 are never picked.
 */
const FETCH_BAD_PORTS: ReadonlySet<number> = new Set([
  1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

export function isFetchBadPort(port: number): boolean {
  return port < 1024 || FETCH_BAD_PORTS.has(port);
}
