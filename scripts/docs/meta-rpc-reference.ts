/**
 * meta-svc's RPC table for the HTTP reference: one row per name in `RPC_NAMES`, the list the
 * server dispatches on (`POST /api/<name>`), with a hand-written line on what each does (the code
 * carries no prose for them). A name without its line stops the generator. Pure.
 */
import { RPC_NAMES } from '../../meta-svc/wire/response-defaults.js';
import { code, markdownTable } from './markdown-table.js';

const WHAT: Readonly<Record<string, string>> = {
  registerInstance: 'Register an instance of a configured instance group (model deployment, block size, location specs); answers the group\'s storage configs. A second registration with other identity fields is `DUPLICATE_ENTITY` naming each difference.',
  getInstanceInfo: 'The instance group an instance belongs to.',
  getCacheLocation: 'Locations of block keys: `QT_BATCH_GET`, `QT_PREFIX_MATCH` or `QT_REVERSE_ROLL_SW_MATCH`; `QT_PREFIX_MATCH_WITH_MAMBA` is `UNSUPPORTED`.',
  getCacheLocationsByBackend: 'Locations chosen per backend selector (`LSS_WEIGHTED_RANDOM`, `LSS_V6D_PREFIX`, `LSS_V6D_COVERAGE`).',
  getCacheLocationLen: 'How many keys of a request have a location (prefix or batch), without the locations.',
  startWriteCache: 'Open a write session: allocate locations for keys not yet stored, on the group\'s first available writable storage.',
  finishWriteCache: 'Close a write session: mark the written keys served, release the rest.',
  removeCache: 'Delete keys (or some of their locations).',
  trimCache: 'Delete an instance\'s block metadata: all of it (`TS_REMOVE_ALL_CACHE`, `TS_REMOVE_ALL_META`) or the locations created in a time range (`TS_TIMESTAMP`); the registration stays.',
  getCacheMeta: 'Per key, index-aligned: the location a batch get would return and a compact JSON of its properties (and, at `detail_level` ≥ 1, every location).',
  getCacheMetaDetail: 'Raw diagnostic view of each key: every location of every status with its URIs, no filtering, no side effect.',
  reportEvent: 'An engine\'s L1.5 / L2 KV events (ADD, DELETE, snapshot, HOST_DOWN) recorded as locations of the reporting storage.',
  getHostCacheState: 'Prefix-match state of a host\'s cache for a request (`QT_PREFIX_MATCH`): local and global match lengths.',
  getClusterInfo: 'This node: `self_node_id` = `leader_node_id` (a single node, always leader) and its HTTP endpoint; `meta_rpc_port` is 0 (no gRPC MetaService).',
};

export function metaRpcMarkdown(): string {
  const missing = RPC_NAMES.filter((n) => WHAT[n] === undefined);
  if (missing.length > 0) throw new Error(`scripts/docs/meta-rpc-reference.ts: describe ${missing.join(', ')}`);
  const extra = Object.keys(WHAT).filter((n) => !(RPC_NAMES as readonly string[]).includes(n));
  if (extra.length > 0) throw new Error(`scripts/docs/meta-rpc-reference.ts: ${extra.join(', ')} are no longer RPCs`);
  return markdownTable(
    ['route', 'what it does'],
    RPC_NAMES.map((n) => [code(`POST /api/${n}`), WHAT[n]!]),
  );
}
