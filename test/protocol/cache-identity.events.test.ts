// cache-identity §4 over real TCP ZeroMQ: a StreamSubscriber of each engine kind fed by the
// engine simulator's rank publisher with vLLM 0.19+ map events (lora_name, per-block extra_keys,
// group_idx, kv_cache_spec_kind, locality), SGLang array events (trailing metadata salt) and an
// xLLM snapshot of identity blocks. Credit is read through the directory's Query (StreamQuery)
// under each identity.
//
//   StreamSubscriber SUB  ◀──[topic, seq, batch]──  XPUB  RankPublisher (vllm | sglang | xllm)
//   StreamSubscriber DEALER ──["", start_seq]──▶ ROUTER  (history replay, or an xLLM snapshot)
import { expect } from 'chai';
import { keyIdentity, PLAIN_IDENTITY, type KeyIdentity } from '../../shared/keys/cache-identity.js';
import { StreamQuery } from '../../directory-svc/index/stream-query.js';
import { toWireStreamStatus } from '../../directory-svc/grpc/kvdirectory-wire.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import { waitFor } from '../helpers/ports.js';
import { OpenRigs, blockTokens, chainTokens, stableClock, type StreamRig } from '../helpers/stream-harness.js';

const LORA = keyIdentity('sql-lora', null);
const SALT = keyIdentity(null, 'tenant-a');
const BOTH = keyIdentity('sql-lora', 'tenant-a');

/** vLLM 0.19+ BlockStored (map form; omit_defaults leaves extra_keys out when nil). */
function vllmStored(hashes: number[], parent: number | null, tokens: number[], extra: Record<string, unknown> = {}): WireEvent {
  return { type: 'BlockStored', block_hashes: hashes, parent_block_hash: parent, token_ids: tokens, block_size: 4, lora_id: null, medium: 'GPU', lora_name: null, group_idx: 0, kv_cache_spec_kind: 'full_attention', ...extra };
}

/** Reusable-prefix tokens of `tokens` under `identity` on the rig's stream (the directory's Query). */
function credit(r: StreamRig, tokens: number[], identity: KeyIdentity = PLAIN_IDENTITY): number {
  return new StreamQuery().query(tokens, [r.sub.toQueryable()], identity).matches[0]!.reusable_prefix_tokens;
}

describe('cache-identity §4 events over real ZeroMQ', function () {
  this.timeout(30_000);
  const rigs = new OpenRigs();
  afterEach(() => rigs.closeAll());

  it('CI1/CI2 a vLLM stream fed map events with lora_name and extra_keys credits each identity only; ListStreams shows the skips', async () => {
    const r = await rigs.open({ engineKind: 'vllm', replayLayout: 3, batchForm: { encoding: 'map', omitDpRank: false } });
    await r.startSynchronized();
    await r.apply([
      vllmStored([11, 12], null, chainTokens(0, 2), { lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora', 'tenant-a'], ['sql-lora']] }),
      vllmStored([21, 22], null, chainTokens(0, 2), { lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora'], ['sql-lora']] }),
      vllmStored([31, 32], null, chainTokens(10, 2), { extra_keys: [['tenant-a'], null] }),
      vllmStored([41, 42], null, chainTokens(20, 2), { extra_keys: [null, [['img-1', 0]]] }),
    ]);
    const t = chainTokens(0, 2);
    expect([credit(r, t, BOTH), credit(r, t, LORA), credit(r, t, SALT), credit(r, t)]).to.deep.equal([8, 8, 0, 0]);
    expect([credit(r, chainTokens(10, 2), SALT), credit(r, chainTokens(10, 2))]).to.deep.equal([8, 0]);
    expect(credit(r, chainTokens(20, 2))).to.equal(4);
    const status = listStreamsRow(r);
    expect(status.engine_kind).to.equal('vllm');
    expect([status.counters.skipped_multimodal, status.counters.skipped_group, status.counters.skipped_out_of_scope]).to.deep.equal(['1', '0', '0']);
  });

  it('CI1 identity events published before the subscriber connected come back through the history replay with their identities', async () => {
    const r = await rigs.open({ engineKind: 'vllm', replayLayout: 2, batchForm: { encoding: 'array', omitDpRank: true } });
    await r.pub.publish([vllmStored([11], null, blockTokens(0), { lora_name: 'sql-lora', extra_keys: [['sql-lora']] })]);
    await r.pub.publish([vllmStored([12], 11, blockTokens(1), { lora_name: 'sql-lora', extra_keys: [['sql-lora']] })]);
    await r.startSynchronized();
    expect(r.pub.snapshotRequests).to.deep.equal([0n]);
    expect([credit(r, chainTokens(0, 2), LORA), credit(r, chainTokens(0, 2))]).to.deep.equal([8, 0]);
  });

  it('CI4 hybrid model: group 1 (sliding window) stores add nothing, its removal leaves group 0 credited, a group 0 removal removes it', async () => {
    const r = await rigs.open({ engineKind: 'vllm' });
    await r.startSynchronized();
    const sw = { group_idx: 1, kv_cache_spec_kind: 'sliding_window', kv_cache_spec_sliding_window: 4096 };
    await r.apply([vllmStored([11, 12], null, chainTokens(0, 2)), vllmStored([11, 12], null, chainTokens(0, 2), sw)]);
    expect([r.sub.index!.entryCount, credit(r, chainTokens(0, 2))]).to.deep.equal([2, 8]);
    await r.apply([{ type: 'BlockRemoved', block_hashes: [12], medium: 'GPU', group_idx: 1 }]);
    expect(credit(r, chainTokens(0, 2))).to.equal(8);
    await r.apply([{ type: 'BlockRemoved', block_hashes: [12], medium: 'GPU', group_idx: 0 }]);
    expect(credit(r, chainTokens(0, 2))).to.equal(4);
    expect(r.sub.counters.skipped.group).to.equal(3);
    expect(r.sub.counters.syncLost).to.deep.equal({});
  });

  it('CI4 decision: a reusable group below the indexed one resynchronizes the stream, which then indexes the lower group from the start', async () => {
    const r = await rigs.open({ engineKind: 'vllm', nowMs: stableClock() });
    await r.startSynchronized();
    // Group 1 (full attention too) is met first: indexed.
    await r.apply([vllmStored([21, 22], null, chainTokens(0, 2), { group_idx: 1 })]);
    expect(credit(r, chainTokens(0, 2))).to.equal(8);
    // Group 0 appears: inconsistent, then a history replay from seq 0 with group 0 selected.
    const seq = await r.pub.publish([vllmStored([11], null, blockTokens(0), { group_idx: 0 })]);
    await waitFor(() => (r.sub.counters.syncLost['inconsistent'] ?? 0) === 1, 5000, 'inconsistent');
    await r.atSequence(seq);
    expect(r.sub.error).to.equal('');
    expect(r.sub.index!.recordCount).to.equal(1);
    expect(credit(r, chainTokens(0, 2))).to.equal(4);
    expect(r.pub.snapshotRequests).to.deep.equal([0n, 0n]);
  });

  it('CI8 an SGLang stream: cache_salt in the trailing metadata map (array events) salts the chain; lora_id without lora_name is out of scope', async () => {
    const r = await rigs.open({ engineKind: 'sglang', batchForm: { encoding: 'array', omitDpRank: false } });
    await r.startSynchronized();
    await r.apply([
      ['BlockStored', [11], null, blockTokens(0), 4, null, 'GPU', { cache_salt: 'tenant-a' }],
      ['BlockStored', [12], 11, blockTokens(1), 4, null, 'GPU'],
      ['BlockStored', [31, 32], null, chainTokens(30, 2), 4, 9, 'GPU'],
    ]);
    expect([credit(r, chainTokens(0, 2), SALT), credit(r, chainTokens(0, 2))]).to.deep.equal([8, 0]);
    expect(credit(r, chainTokens(30, 2))).to.equal(0);
    expect(r.sub.counters.skipped.outOfScope).to.equal(2);
  });

  it('CI8 locality "REMOTE" is a tier we do not serve on a vLLM stream (skipped medium, no credit)', async () => {
    const r = await rigs.open({ engineKind: 'vllm' });
    await r.startSynchronized();
    await r.apply([vllmStored([11, 12], null, chainTokens(0, 2), { locality: 'REMOTE' })]);
    expect(credit(r, chainTokens(0, 2))).to.equal(0);
    expect(r.sub.counters.skipped.medium).to.equal(2);
  });

  it('CI1/CI2 an xLLM snapshot of identity blocks (per-block lora_name and extra_keys) rebuilds the index under those identities', async () => {
    const r = await rigs.open({});
    r.pub.setSnapshotState(
      [
        { block_hash: 11, parent_block_hash: null, token_ids: blockTokens(0), media: ['gpu'], lora_name: 'sql-lora', lora_id: 3, extra_keys: ['sql-lora', 'tenant-a'] },
        { block_hash: 12, parent_block_hash: 11, token_ids: blockTokens(1), media: ['gpu', 'cpu'], lora_name: 'sql-lora', extra_keys: ['sql-lora'] },
        { block_hash: 21, parent_block_hash: null, token_ids: blockTokens(5), media: ['gpu'], extra_keys: [['img-1', 0]] },
      ],
      0n,
    );
    await r.startSynchronized();
    expect([credit(r, chainTokens(0, 2), BOTH), credit(r, chainTokens(0, 2), LORA), credit(r, chainTokens(0, 2))]).to.deep.equal([8, 0, 0]);
    expect(credit(r, blockTokens(5))).to.equal(0);
    expect(r.sub.counters.skipped.multimodal).to.equal(1);
  });
});

/** The stream as ListStreams shows it (Directory.listStreams' row, then its wire form). */
function listStreamsRow(r: StreamRig): ReturnType<typeof toWireStreamStatus> {
  const index = r.sub.index;
  return toWireStreamStatus({
    ...r.sub.config,
    engineKind: r.sub.config.engineKind ?? 'xllm',
    state: r.sub.state,
    synchronized: r.sub.state === 'SYNCHRONIZED',
    sequence: r.sub.sequence,
    error: r.sub.error,
    deviceBlocks: index?.deviceBlocks ?? 0,
    hostBlocks: index?.hostBlocks ?? 0,
    entryCount: index?.entryCount ?? 0,
    counters: r.sub.counters,
  });
}
