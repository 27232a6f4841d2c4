/**
 * A stream as the directory describes it, from a static `streams` entry (kv-events §9), a
 * discovery plan or the engines file (engines.md §4): its identity (instance name, dp rank, with
 * its key and order in shared/keys/stream-key.ts), addresses, block size, topic, kind and exact
 * hash seed. The per-stream records of the directory are these or picks of them.
 */
import type { EngineKind } from '../../shared/config/engine-kind.js';
import type { StaticStreamConfig } from '../../shared/config/kv-events-config.js';
import type { StreamIdentity } from '../../shared/keys/stream-key.js';
import type { EngineIdentitySource } from '../engines/engine-identity.js';

/** Identity, addresses, block size, topic and kind, with the exact hash seed (§4). */
export interface StreamSpec extends StreamIdentity, Omit<StaticStreamConfig, 'hashSeed'> {
  readonly hashSeed: bigint;
}

/** What a subscriber takes (and `Directory.addStream` besides a static entry); kind absent = `xllm`. */
export interface StreamConfig extends StreamSpec {
  /** engines.md §3 rule 4: the engines-file scraper of the stream's engine (absent: no identity source). */
  readonly identity?: EngineIdentitySource;
  /** Discovery streams: the registration subscribed for (the view stream's stream identity). */
  readonly incarnationId?: string | null;
  readonly generation?: number;
}

/** A stream as the Directory keeps it: the kind settled (engines.md §1). */
export interface SubscriberStreamConfig extends StreamConfig {
  readonly engineKind: EngineKind;
}
