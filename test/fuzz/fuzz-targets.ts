// The in-process fuzz targets: how each one builds input i from its corpus and what it may throw.
// Loaded by the guarded worker (fuzz-worker.ts) to run inputs, and by the main thread to rebuild
// input i of a failed run for the report. A target's `run` throws only when the code under test
// threw something outside its contract; allowed errors are counted by class.
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { isConfigError } from '../../shared/config/config-error.js';
import { parseKvEventsConfig } from '../../shared/config/kv-events-config.js';
import { parseDirectoryFlags } from '../../shared/config/directory-flags.js';
import { parseRouterFlags } from '../../shared/config/router-flags.js';
import { parseMetaFlags } from '../../shared/config/meta-flags.js';
import { decodeLiveMessage } from '../../directory-svc/decoder/live-frame-decoder.js';
import { SnapshotAssembler, decodeSnapshotChunk, decodeSnapshotMessage } from '../../directory-svc/decoder/snapshot-decoder.js';
import { isStreamError } from '../../directory-svc/errors/stream-errors.js';
import { StreamIndex } from '../../directory-svc/index/stream-index.js';
import type { ResidencyObserver, SkipCounters } from '../../directory-svc/index/stream-index.js';
import { ResidencyGroups } from '../../shared/index/residency-groups.js';
import type { KvEvent } from '../../directory-svc/decoder/kv-batch.js';
import { isDiscoveryError } from '../../directory-svc/discovery/discovery-errors.js';
import { parseHeartbeat } from '../../directory-svc/discovery/load-report.js';
import { parseMetaConfig } from '../../meta-svc/config/meta-config.js';
import { readBlockMask } from '../../meta-svc/keys/block-mask.js';
import { readRawKeys } from '../../meta-svc/keys/request-keys.js';
import { isBadRequestError } from '../../meta-svc/meta-errors.js';
import { QueryType, StorageType, TrimStrategy } from '../../meta-svc/meta-enums.js';
import { JsonParseError, parseJson } from '../../meta-svc/wire/json-parse.js';
import { RequestReader } from '../../meta-svc/wire/request-reader.js';
import { isRouterHttpError } from '../../router-svc/http/router-http-errors.js';
import { parseKvQueryRequest, parseRouteRequest } from '../../router-svc/http/route-request.js';
import { containsExt, hasDuplicateMapKeys, referenceBatch, referenceChunk } from './reference-batch.js';
import type { RefEvent, RefSnapshotBlock } from './reference-batch.js';
import { Rng } from './lib/rng.js';
import { hex } from './lib/memory.js';
import { loadCorpus } from './lib/corpus.js';
import { mutateBytes } from './lib/byte-mutations.js';
import { mutateJsonText } from './lib/json-mutations.js';
import { mutateMsgpackInput, scanMsgpack } from './lib/msgpack-mutations.js';

/** What a target's `run` reports: the outcome class ('ok' or the allowed error's class). */
export type Outcome = string;

export interface FuzzTarget<I> {
  readonly name: string;
  /** Rebuilds input i: a pure function of the generator and the (loaded) corpus. */
  generate(rng: Rng): I;
  /** Runs one input; returns the outcome, throws only on a contract violation. */
  run(input: I): Outcome;
  /** A printable form of an input for failure reports. */
  show(input: I): string;
}

/** Thrown by `run` when the code under test broke its error contract. */
export class ContractViolation extends Error {
  constructor(
    readonly target: string,
    readonly violation: unknown,
  ) {
    super(`${target}: threw ${describeError(violation)}`);
  }
}

export function describeError(e: unknown): string {
  if (e instanceof Error) return `${e.constructor.name}: ${e.message}\n${(e.stack ?? '').split('\n').slice(1, 6).join('\n')}`;
  return `non-Error value ${String(e)}`;
}

const utf8 = new TextDecoder('utf-8');
const utf8Fatal = new TextDecoder('utf-8', { fatal: true });
const BLOCK_SIZE = 4;
const MAX_MESSAGE_BYTES = 65_536;

function textCorpus(kind: string): string[] {
  return loadCorpus(kind).map((c) => utf8.decode(c.bytes));
}

function seq8(rng: Rng): Uint8Array {
  const b = new Uint8Array(8);
  b[7] = rng.int(256);
  if (rng.chance(0.1)) b.fill(0xff);
  return b;
}

// ---- kv-events: live frames, batch payloads applied to an index, snapshot replies -------------

let hasher: ContentKeyHasher | null = null;

/** The async part of target set-up (the XXH3 wasm); call once before `run`. */
export async function prepareTargets(): Promise<void> {
  hasher ??= await ContentKeyHasher.forSeed(1024n);
}

function zeroSkips(): SkipCounters {
  return { outOfScope: 0, descendant: 0, orphan: 0 };
}

/** A small index holding the §3.5 blocks 11 and 12 (so mutated events meet known hashes too). */
function seededIndex(onResidencyChange?: ResidencyObserver): StreamIndex {
  if (hasher === null) throw new Error('prepareTargets() not called');
  const index = new StreamIndex({ blockSize: BLOCK_SIZE, hasher, maxEntries: 64, ...(onResidencyChange === undefined ? {} : { onResidencyChange }) });
  const batch = decodeLiveMessage([new Uint8Array(0), new Uint8Array(8), LIVE_SEED_FOR_INDEX], LIVE_OPTS);
  if (batch.kind === 'batch') index.applyEvents(batch.batch.events, zeroSkips());
  return index;
}

const LIVE_OPTS = { topic: new Uint8Array(0), dpRank: 0, maxMessageBytes: MAX_MESSAGE_BYTES };
let LIVE_SEED_FOR_INDEX: Uint8Array = new Uint8Array(0);

function streamOutcome(name: string, e: unknown): Outcome {
  if (isStreamError(e)) return e.class;
  throw new ContractViolation(name, e);
}

/** The events of a live message, or the outcome of one that did not decode to a batch. */
function decodedEvents(name: string, frames: Uint8Array[]): readonly KvEvent[] | Outcome {
  try {
    const r = decodeLiveMessage(frames, LIVE_OPTS);
    return r.kind === 'topic_mismatch' ? 'topic_mismatch' : r.batch.events;
  } catch (e) {
    return streamOutcome(name, e);
  }
}

function liveTarget(name: string, frameMutationRate: number): FuzzTarget<Uint8Array[]> {
  const corpus = loadCorpus('live-batch').map((c) => c.bytes);
  LIVE_SEED_FOR_INDEX = corpus[1]!;
  return {
    name,
    generate(rng) {
      const seed = rng.pick(corpus);
      const payload = rng.chance(0.9) ? mutateMsgpackInput(rng, seed, corpus) : seed;
      const frames: Uint8Array[] = [new Uint8Array(0), seq8(rng), payload];
      if (rng.chance(frameMutationRate)) {
        switch (rng.int(5)) {
          case 0:
            frames.splice(rng.int(3), 1);
            break;
          case 1:
            frames.push(rng.bytes(rng.int(4)));
            break;
          case 2:
            frames[1] = rng.bytes(rng.pick([0, 7, 9]));
            break;
          case 3:
            frames[0] = Uint8Array.from(Buffer.from(rng.pick(['xllm-kv', 'x', '\u0000'])));
            break;
          default:
            frames[2] = new Uint8Array(MAX_MESSAGE_BYTES + 1 + rng.int(16));
        }
      }
      return frames;
    },
    run(frames) {
      const events = decodedEvents(name, frames);
      if (typeof events === 'string') return events;
      // A decoded batch must also apply (or fail with a StreamError) on a non-empty index.
      try {
        seededIndex().applyEvents(events, zeroSkips());
        return 'ok';
      } catch (e) {
        return `index_${streamOutcome(name, e)}`;
      }
    },
    show: (frames) => `frames [${frames.map((f) => hex(f)).join(', ')}]`,
  };
}

/**
 * Differential: the shared group index fed by the stream index's residency observer (as the
 * services feed it) must hold exactly the index's residency after every mutated batch — applied
 * whole or failed part-way (partial effects are reported too): same keys, tiers and block counts.
 */
function residencyMirrorTarget(): FuzzTarget<Uint8Array[]> {
  const base = liveTarget('residency-mirror', 0);
  return {
    ...base,
    name: 'residency-mirror',
    run(frames) {
      if (hasher === null) throw new Error('prepareTargets() not called');
      const events = decodedEvents('residency-mirror', frames);
      if (typeof events === 'string') return events;
      const { group, slot } = new ResidencyGroups().join(BLOCK_SIZE, hasher);
      const index = seededIndex((w, o, _old, tiers) => group.setKeyTiers(slot, w, o, tiers));
      let outcome = 'ok';
      try {
        index.applyEvents(events, zeroSkips());
      } catch (e) {
        outcome = `index_${streamOutcome('residency-mirror', e)}`;
      }
      const want = index.exportResidency();
      const mismatch = (what: string): never => {
        throw new ContractViolation('residency-mirror', new Error(`group index differs from the stream index: ${what}`));
      };
      if (group.keyCount !== want.tiers.length) mismatch(`${group.keyCount} keys, index has ${want.tiers.length}`);
      if (group.deviceBlocks(slot) !== index.deviceBlocks || group.hostBlocks(slot) !== index.hostBlocks) mismatch('block counts');
      for (let i = 0; i < want.tiers.length; i++) if (group.tiersOf(slot, want.keys, i * 16) !== want.tiers[i]) mismatch(`tiers of key ${i}`);
      return outcome;
    },
  };
}

/**
 * @msgpack/msgpack turns float 1.0 into the number 1, so the reference cannot tell a float where
 * §3 wants an int (a parse error) from the int: such inputs are judged by the other targets.
 */
function floatOutsideTs(payload: Uint8Array): boolean {
  return scanMsgpack(payload).some((h) => (payload[h.offset] === 0xca || payload[h.offset] === 0xcb) && h.offset !== 1 && h.offset !== 4);
}

/** Our decoded events in the reference decoder's shape (TIER_UNSERVED 0: a REMOTE locality, cache-identity §4 rule 5). */
function normalized(events: readonly KvEvent[]): RefEvent[] {
  return events.map((e): RefEvent => {
    switch (e.kind) {
      case 'stored':
        return {
          kind: 'stored',
          hashes: Array.from(e.blockHashes),
          parent: e.parentBlockHash,
          tokens: Array.from(e.tokenIds),
          blockSize: e.blockSize,
          tier: e.tier,
          outOfScope: e.outOfScope,
          identity: { lora: e.identity.loraName, salt: e.identity.salt },
          reproducibleBlocks: e.reproducibleBlocks,
          group: e.group,
          reusableGroup: e.reusableGroup,
        };
      case 'removed':
        return { kind: 'removed', hashes: Array.from(e.blockHashes), tier: e.tier, group: e.group };
      default:
        return { kind: 'cleared', tiers: e.tiers };
    }
  });
}

/**
 * @msgpack/msgpack decodes invalid UTF-8 leniently (U+FFFD, or a wrong code point for a bad
 * continuation byte) where the production decoder rejects a LoRA name or salt (`parse`): inputs
 * holding any str that is not valid UTF-8 are judged by the other targets.
 */
function invalidUtf8(payload: Uint8Array): boolean {
  for (const h of scanMsgpack(payload)) {
    if (h.kind !== 'str') continue;
    const t = payload[h.offset]!;
    const len = t <= 0xbf ? t & 0x1f : t === 0xd9 ? payload[h.offset + 1]! : t === 0xda ? (payload[h.offset + 1]! << 8) | payload[h.offset + 2]! : -1;
    if (len < 0) return true;
    const start = h.offset + h.headerBytes;
    if (strictUtf8(payload.subarray(start, Math.min(start + len, payload.length))) === null) return true;
  }
  return false;
}

const showJson = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x instanceof Uint8Array ? `bin:${hex(x, 64)}` : x));

/**
 * Differential: the production decoder against an independent reading of §3 over another
 * MessagePack implementation (reference-batch.ts). Same events, or the same error class.
 */
function liveDiffTarget(): FuzzTarget<Uint8Array> {
  const corpus = loadCorpus('live-batch').map((c) => c.bytes);
  const opts = { topic: new Uint8Array(0), dpRank: 0, maxMessageBytes: 1 << 24 };
  return {
    name: 'live-diff',
    generate: (rng) => mutateMsgpackInput(rng, rng.pick(corpus), corpus),
    run(payload) {
      const ref = referenceBatch(payload, 0);
      if (ref.value !== undefined && containsExt(ref.value)) return 'ext_skipped';
      if (hasDuplicateMapKeys(payload)) return 'duplicate_keys_skipped';
      let ours: RefEvent[] | null = null;
      let oursCls = '';
      try {
        const r = decodeLiveMessage([new Uint8Array(0), new Uint8Array(8), payload], opts);
        if (r.kind === 'batch') ours = normalized(r.batch.events);
      } catch (e) {
        oursCls = streamOutcome('live-diff', e);
      }
      const agree = ours !== null ? ref.ok && showJson(ours) === showJson(ref.events) : !ref.ok && oursCls === ref.cls;
      if (!agree && invalidUtf8(payload)) return 'utf8_skipped';
      if (ours !== null && ref.ok) {
        if (showJson(ours) !== showJson(ref.events)) throw new ContractViolation('live-diff', new Error(`decoded events differ:\n ours ${showJson(ours)}\n  ref ${showJson(ref.events)}`));
        return 'both_ok';
      }
      if (ours !== null && !ref.ok) throw new ContractViolation('live-diff', new Error(`accepted what §3 rejects (${ref.cls}: ${ref.why}): ${showJson(ours)}`));
      if (ours === null && ref.ok && floatOutsideTs(payload)) return 'float_skipped';
      if (ours === null && ref.ok) throw new ContractViolation('live-diff', new Error(`rejected (${oursCls}) what §3 accepts: ${showJson(ref.events)}`));
      if (!ref.ok && oursCls !== ref.cls && floatOutsideTs(payload)) return 'float_skipped';
      if (!ref.ok && oursCls !== ref.cls) throw new ContractViolation('live-diff', new Error(`error class ${oursCls}, §3 says ${ref.cls} (${ref.why})`));
      return `both_${oursCls}`;
    },
    show: (payload) => `payload ${hex(payload)}`,
  };
}

/** Differential for §6 chunks: decodeSnapshotChunk against referenceChunk. */
function snapshotDiffTarget(): FuzzTarget<Uint8Array> {
  const corpus = loadCorpus('snapshot-chunk').map((c) => c.bytes);
  const opts = { dpRank: 0, blockSize: BLOCK_SIZE, maxMessageBytes: 1 << 24 };
  return {
    name: 'snapshot-diff',
    generate: (rng) => mutateMsgpackInput(rng, rng.pick(corpus), corpus),
    run(payload) {
      const ref = referenceChunk(payload, 0, BLOCK_SIZE);
      if (ref.value !== undefined && containsExt(ref.value)) return 'ext_skipped';
      if (hasDuplicateMapKeys(payload)) return 'duplicate_keys_skipped';
      let ours: RefSnapshotBlock[] | null = null;
      let oursCls = '';
      try {
        ours = decodeSnapshotChunk(payload, opts).map((b) => ({
          hash: b.blockHash,
          parent: b.parentBlockHash,
          tokens: Array.from(b.tokenIds),
          tiers: b.tiers,
          outOfScope: b.outOfScope,
          multimodal: b.multimodal,
          identity: { lora: b.identity.loraName, salt: b.identity.salt },
        }));
      } catch (e) {
        oursCls = streamOutcome('snapshot-diff', e);
      }
      const agree = ours !== null ? ref.ok && showJson(ours) === showJson(ref.blocks) : !ref.ok && oursCls === ref.cls;
      if (!agree && invalidUtf8(payload)) return 'utf8_skipped';
      const floats = scanMsgpack(payload).some((h) => payload[h.offset] === 0xca || payload[h.offset] === 0xcb);
      if (ours !== null && ref.ok) {
        if (showJson(ours) !== showJson(ref.blocks)) throw new ContractViolation('snapshot-diff', new Error(`decoded blocks differ:\n ours ${showJson(ours)}\n  ref ${showJson(ref.blocks)}`));
        return 'both_ok';
      }
      if (ours !== null && !ref.ok) throw new ContractViolation('snapshot-diff', new Error(`accepted what §6 rejects (${ref.cls}: ${ref.why}): ${showJson(ours)}`));
      if (floats && (ours === null) !== !ref.ok) return 'float_skipped';
      if (floats && !ref.ok && oursCls !== ref.cls) return 'float_skipped';
      if (ours === null && ref.ok) throw new ContractViolation('snapshot-diff', new Error(`rejected (${oursCls}) what §6 accepts: ${showJson(ref.blocks)}`));
      if (!ref.ok && oursCls !== ref.cls) throw new ContractViolation('snapshot-diff', new Error(`error class ${oursCls}, §6 says ${ref.cls} (${ref.why})`));
      return `both_${oursCls}`;
    },
    show: (payload) => `chunk ${hex(payload)}`,
  };
}

/** Snapshot replies: a few messages fed to the assembler and the §6 builder, in order. */
function snapshotTarget(): FuzzTarget<Uint8Array[][]> {
  const corpus = loadCorpus('snapshot-chunk').map((c) => c.bytes);
  const TERM = new Uint8Array(8).fill(0xff);
  return {
    name: 'snapshot-reply',
    generate(rng) {
      const w = new Uint8Array(8);
      w[7] = rng.int(16);
      const messages: Uint8Array[][] = [];
      const chunks = 1 + rng.int(3);
      for (let i = 0; i < chunks; i++) {
        const seed = rng.pick(corpus);
        messages.push([new Uint8Array(0), w, rng.chance(0.85) ? mutateMsgpackInput(rng, seed, corpus) : seed]);
      }
      if (rng.chance(0.8)) messages.push([new Uint8Array(0), TERM, new Uint8Array(0)]);
      if (rng.chance(0.2)) {
        const m = messages[rng.int(messages.length)]!;
        const f = rng.int(m.length);
        m[f] = mutateBytes(rng, m[f]!);
      }
      return messages;
    },
    run(messages) {
      if (hasher === null) throw new Error('prepareTargets() not called');
      const index = new StreamIndex({ blockSize: BLOCK_SIZE, hasher, maxEntries: 64 });
      const assembler = new SnapshotAssembler();
      const skipped = zeroSkips();
      try {
        for (const frames of messages) {
          const msg = decodeSnapshotMessage(frames, { dpRank: 0, blockSize: BLOCK_SIZE, maxMessageBytes: MAX_MESSAGE_BYTES });
          assembler.accept(msg);
          if (msg.kind === 'chunk') for (const b of msg.blocks) index.addSnapshotBlock(b, skipped);
        }
        return assembler.complete ? 'ok' : 'incomplete';
      } catch (e) {
        return streamOutcome('snapshot-reply', e);
      }
    },
    show: (messages) => messages.map((m) => `[${m.map((f) => hex(f)).join(', ')}]`).join(' '),
  };
}

// ---- JSON targets ----------------------------------------------------------------------------

function jsonTextTarget(name: string, kind: string, run: (text: string) => Outcome): FuzzTarget<string> {
  const corpus = textCorpus(kind);
  return {
    name,
    generate: (rng) => {
      const seed = rng.pick(corpus);
      return rng.chance(0.95) ? mutateJsonText(rng, seed, corpus) : seed;
    },
    run,
    show: (text) => JSON.stringify(text.length > 4096 ? `${text.slice(0, 4096)}…` : text),
  };
}

/** JSON.parse as an HTTP edge would (a SyntaxError is that edge's 400, not the parser's business). */
function plainJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}

function heartbeatTarget(): FuzzTarget<string> {
  return jsonTextTarget('heartbeat', 'heartbeat', (text) => {
    const j = plainJson(text);
    if (!j.ok) return 'not_json';
    try {
      parseHeartbeat(j.value);
      return 'ok';
    } catch (e) {
      if (isDiscoveryError(e)) return e.class;
      throw new ContractViolation('heartbeat', e);
    }
  });
}

function kvEventsConfigTarget(): FuzzTarget<string> {
  return jsonTextTarget('kv-events-config', 'kv-events-config', (text) => {
    try {
      parseKvEventsConfig(text);
      return 'ok';
    } catch (e) {
      if (isConfigError(e)) return 'config_error';
      throw new ContractViolation('kv-events-config', e);
    }
  });
}

function metaConfigTarget(): FuzzTarget<string> {
  return jsonTextTarget('meta-config', 'meta-config', (text) => {
    try {
      // Pure: problems come back as `errors`, nothing is thrown (kvcm-meta §8).
      const r = parseMetaConfig({ fileText: text, hostname: 'fuzz-host', firstIpv4: '127.0.0.1' });
      return r.ok ? 'ok' : 'errors';
    } catch (e) {
      throw new ContractViolation('meta-config', e);
    }
  });
}

function routerBodyTarget(): FuzzTarget<string> {
  return jsonTextTarget('router-body', 'router-body', (text) => {
    const j = plainJson(text);
    if (!j.ok) return 'not_json';
    let outcome = 'ok';
    for (const parse of [parseRouteRequest, parseKvQueryRequest]) {
      try {
        parse(j.value);
      } catch (e) {
        if (!isRouterHttpError(e)) throw new ContractViolation('router-body', e);
        outcome = `http_${e.httpStatus}`;
      }
    }
    return outcome;
  });
}

/** argv given as a JSON array; mutated both as JSON and element by element. */
function flagsTarget(): FuzzTarget<string[]> {
  const corpus = textCorpus('flags');
  const words = ['--help', '-h', '--', '--http_port', '=', '--log_level=debug', '--etcd_addr=[::1]:2379,h:1', '--car_prefill_lambda=1e-3', '--target_ttft=', '--meta_http_port=0', '--http_port=65536', '--http_port=0x10', '--directory_addr=', '--view_stale_after_ms=+100', '--meta_store=redis://h:1/0', '--meta_store=sqlite:', '--node_id='];
  return {
    name: 'flags',
    generate(rng) {
      const seed = rng.pick(corpus);
      const j = plainJson(rng.chance(0.5) ? mutateJsonText(rng, seed, corpus) : seed);
      let argv = j.ok && Array.isArray(j.value) ? j.value.map((x) => String(x)) : (JSON.parse(seed) as string[]);
      const n = rng.int(3);
      for (let k = 0; k < n; k++) {
        const i = rng.int(argv.length + 1);
        if (rng.chance(0.5)) argv.splice(i, 0, rng.pick(words));
        else if (argv.length > 0) argv[Math.min(i, argv.length - 1)] = mutateJsonText(rng, argv[Math.min(i, argv.length - 1)]!);
      }
      if (argv.length > 64) argv = argv.slice(0, 64);
      return argv;
    },
    run(argv) {
      let outcome = '';
      for (const parse of [(a: string[]) => parseDirectoryFlags(a, { KVCM_META_CONFIG_FILE: '/x.json' }), parseRouterFlags, (a: string[]) => parseMetaFlags(a, { KVCM_META_CONFIG_FILE: '/x.json' })]) {
        try {
          outcome += parse(argv).kind;
        } catch (e) {
          if (!isConfigError(e)) throw new ContractViolation('flags', e);
          outcome += 'config_error';
        }
        outcome += '/';
      }
      return outcome;
    },
    show: (argv) => JSON.stringify(argv),
  };
}

// ---- MetaService JSON: the lossless parser, then every typed read a handler may make -----------

/** Field → reader for every request field of kvcm-meta §5.1 and §7.1 (unknown fields are never read). */
function readEverything(r: RequestReader, depth = 0): void {
  const reads: ((x: RequestReader) => unknown)[] = [
    (x) => x.str('trace_id'),
    (x) => x.str('instance_id'),
    (x) => x.str('instance_group'),
    (x) => x.str('write_session_id'),
    (x) => x.str('host_ip_port'),
    (x) => x.str('name'),
    (x) => x.str('uri'),
    (x) => x.str('block_key'),
    (x) => x.int32('block_size'),
    (x) => x.int32('sw_size'),
    (x) => x.int32('write_timeout_seconds'),
    (x) => x.int32('min_replica_count'),
    (x) => x.int32('begin_timestamp'),
    (x) => x.int32('end_timestamp'),
    (x) => x.int32('detail_level'),
    (x) => x.int32('tp_size'),
    (x) => x.int64('size'),
    (x) => x.int64('offset'),
    (x) => x.uint64('s_version'),
    (x) => x.enumOf('query_type', QueryType),
    (x) => x.enumOf('default_query_type', QueryType),
    (x) => x.enumOf('strategy', TrimStrategy),
    (x) => x.enumOf('storage_type', StorageType),
    (x) => x.int64List('block_cache_keys'),
    (x) => x.strList('location_spec_names'),
    (x) => x.strList('location_spec_group_names'),
    (x) => x.strList('medium'),
    (x) => x.strList('spec_names'),
    (x) => x.strList('mediums'),
    (x) => x.boolList('values'),
    (x) => x.map('properties'),
    (x) => readRawKeys(x),
    (x) => readBlockMask(x.message('block_mask'), 'block_mask'),
    (x) => readBlockMask(x.message('success_blocks'), 'success_blocks'),
  ];
  for (const read of reads) {
    try {
      read(r);
    } catch (e) {
      if (!isBadRequestError(e)) throw new ContractViolation('meta-request', e);
    }
  }
  if (depth > 3) return;
  for (const name of ['model_deployment', 'bool_masks', 'node_register', 'block_add', 'block_delete', 'block_snapshot', 'heartbeat']) {
    try {
      const m = r.message(name);
      if (m !== null) readEverything(m, depth + 1);
    } catch (e) {
      if (!isBadRequestError(e)) throw new ContractViolation('meta-request', e);
    }
  }
  for (const name of ['location_spec_infos', 'location_spec_groups', 'events', 'specs', 'blocks']) {
    try {
      for (const m of r.messages(name).slice(0, 8)) readEverything(m, depth + 1);
    } catch (e) {
      if (!isBadRequestError(e)) throw new ContractViolation('meta-request', e);
    }
  }
}

function metaRequestTarget(): FuzzTarget<string> {
  return jsonTextTarget('meta-request', 'meta-request', (text) => {
    let value;
    try {
      value = parseJson(text, { maxDepth: 100, maxChars: 1 << 20 });
    } catch (e) {
      if (e instanceof JsonParseError) return 'json_parse';
      throw new ContractViolation('meta-request', e);
    }
    let reader: RequestReader;
    try {
      reader = RequestReader.ofBody(value);
    } catch (e) {
      if (isBadRequestError(e)) return 'not_object';
      throw new ContractViolation('meta-request', e);
    }
    readEverything(reader);
    return 'read';
  });
}

/**
 * Targets that misbehave on purpose at input 3, so the guard's own test can show a hang and a
 * contract violation are reported with the seed, the iteration and the input.
 */
function guardSelfTest(kind: 'hang' | 'throw'): FuzzTarget<number> {
  return {
    name: `selftest-${kind}`,
    generate: (rng) => rng.int(1000),
    run(input) {
      if (input !== SELFTEST_BAD_INPUT) return 'ok';
      if (kind === 'throw') throw new ContractViolation(`selftest-${kind}`, new TypeError('deliberate'));
      for (;;) {
        // a synchronous infinite loop: only the worker's termination can end it
      }
    },
    show: (input) => `number ${input}`,
  };
}

/** The input value at which the self-test targets misbehave (generated at iteration 3 with seed 1). */
export const SELFTEST_BAD_INPUT = Rng.forIteration(1, 3).int(1000);

/** Every target by name (the worker and the report look them up here). */
export function makeTarget(name: string): FuzzTarget<unknown> {
  const targets: Record<string, () => FuzzTarget<never>> = {
    'live-frame': () => liveTarget('live-frame', 0.3) as FuzzTarget<never>,
    'live-batch': () => liveTarget('live-batch', 0) as FuzzTarget<never>,
    'snapshot-reply': () => snapshotTarget() as FuzzTarget<never>,
    'live-diff': () => liveDiffTarget() as FuzzTarget<never>,
    'residency-mirror': () => residencyMirrorTarget() as FuzzTarget<never>,
    'snapshot-diff': () => snapshotDiffTarget() as FuzzTarget<never>,
    'selftest-hang': () => guardSelfTest('hang') as FuzzTarget<never>,
    'selftest-throw': () => guardSelfTest('throw') as FuzzTarget<never>,
    heartbeat: () => heartbeatTarget() as FuzzTarget<never>,
    'kv-events-config': () => kvEventsConfigTarget() as FuzzTarget<never>,
    'meta-config': () => metaConfigTarget() as FuzzTarget<never>,
    'router-body': () => routerBodyTarget() as FuzzTarget<never>,
    flags: () => flagsTarget() as FuzzTarget<never>,
    'meta-request': () => metaRequestTarget() as FuzzTarget<never>,
  };
  const make = targets[name];
  if (make === undefined) throw new Error(`unknown fuzz target ${name}`);
  return make() as FuzzTarget<unknown>;
}

/** Bytes of a UTF-8 body, or null when they are not valid UTF-8 (for the HTTP target's report). */
export function strictUtf8(b: Uint8Array): string | null {
  try {
    return utf8Fatal.decode(b);
  } catch {
    return null;
  }
}
