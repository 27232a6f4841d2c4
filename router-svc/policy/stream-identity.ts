/**
 * Whether a view stream describes the engine an instance names now (routing.md "CAR"): streams of
 * an older registration give no prefix credit and count for nothing else either.
 */
import type { RouterInstance, RouterStream } from '../viewcache/view-cache.js';

/**
 * routing.md: credit only for streams subscribed for the instance's current registration — the
 * incarnation id, or for engines without one the registration (generation, which changes exactly
 * when the engine behind the name is replaced). A generation of 0 (static streams) is unknown
 * and not held against the stream.
 */
export function streamMatchesInstance(stream: RouterStream, inst: RouterInstance): boolean {
  if (stream.incarnationId !== inst.incarnationId) return false;
  if (stream.generation !== 0n && inst.generation !== 0n && stream.generation !== inst.generation) return false;
  return true;
}
