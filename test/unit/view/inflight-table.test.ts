/**
 * routing.md "In-flight load" on the directory: routers' reports folded per instance and router
 * (InflightTable), ended by a load report accepted after the decision or by the 2 s TTL, and
 * published in the view as ViewInstance.inflight on instance upserts (and in snapshots), in the
 * same delta as the load report that ends them. Clocks are hand-moved; deltas are cut by flush().
 */
import { expect } from 'chai';
import type { InstanceRegistration } from '../../../directory-svc/discovery/instance-json.js';
import { checkInflightReport } from '../../../directory-svc/grpc/inflight-handler.js';
import { InflightService } from '../../../directory-svc/inflight/inflight-service.js';
import { INFLIGHT_TTL_MS, InflightTable, LAST_END_KEEP_MS } from '../../../directory-svc/inflight/inflight-table.js';
import { MAX_PROMPT_GRANULES, PENDING_PROMPTS_PER_SHARE } from '../../../shared/keys/prompt-fingerprint.js';
import { ViewPublisher } from '../../../directory-svc/view/view-publisher.js';
import type { ViewSink } from '../../../directory-svc/view/view-watcher.js';
import { decodeViewUpdate, type DecodedViewUpdate } from '../../helpers/view-model.js';
import { TableInstances } from '../../helpers/instance-table-source.js';
import { NO_LAST_END } from '../../../shared/view/view-wire.js';

function registration(name: string): InstanceRegistration {
  return { name, type: 'DEFAULT', rpcAddress: name, incarnationId: 'inc-1', registerTsMs: 1000, dpSize: 1, ttftProfile: [], tpotProfile: [], backendType: 'xllm', models: null };
}

/** A real InstanceTable with any number of change listeners (as DiscoveryService has). */
class Instances extends TableInstances {
  heartbeat(name: string, waiting: number): void {
    this.emit(this.table.heartbeat({ name, incarnationId: 'inc-1', currentRole: null, load: { waitingRequests: waiting, gpuCacheUsage: 0, recentMaxTtftMs: null, recentMaxTbtMs: null } }, 0).changes);
  }
}

describe('routing.md In-flight load (directory)', () => {
  describe('InflightTable', () => {
    it('folds reports per instance and router, sorted by router id', () => {
      const t = new InflightTable();
      t.report('r2', 'a', 2, 100, 100);
      t.report('r1', 'a', 1, 101, 101);
      t.report('r2', 'a', 3, 102, 102);
      t.report('r1', 'b', 4, 102, 102);
      expect(t.sharesOf('a')).to.deep.equal([{ router_id: 'r1', count: 1, prompts: [], prompt_seqs: [] }, { router_id: 'r2', count: 5, prompts: [], prompt_seqs: [] }]);
      expect(t.totalOf('b')).to.equal(4);
      expect(t.sharesOf('c')).to.deep.equal([]);
    });

    it('a load report accepted after a decision ends it; decisions after the report stay', () => {
      const t = new InflightTable();
      const changed: string[] = [];
      t.onChange((n) => changed.push(n));
      t.report('r1', 'a', 2, 100, 100);
      t.report('r2', 'a', 1, 150, 150);
      t.loadReported('a', 120);
      expect(t.sharesOf('a')).to.deep.equal([{ router_id: 'r2', count: 1, prompts: [], prompt_seqs: [] }]);
      t.loadReported('a', 140); // nothing older left: no change announced
      expect(changed).to.deep.equal(['a', 'a', 'a']);
      t.loadReported('a', 151);
      expect(t.sharesOf('a')).to.deep.equal([]);
      expect(t.active).to.equal(false);
    });

    it(`expiry: an entry ends ${INFLIGHT_TTL_MS} ms after its decision; one already that old is never added`, () => {
      const t = new InflightTable();
      t.report('r1', 'a', 1, 1000, 1000);
      t.report('r1', 'a', 1, 1500, 1500);
      t.expire(1000 + INFLIGHT_TTL_MS - 1);
      expect(t.totalOf('a')).to.equal(2);
      t.expire(1000 + INFLIGHT_TTL_MS);
      expect(t.totalOf('a')).to.equal(1);
      t.report('r1', 'b', 1, 0, INFLIGHT_TTL_MS);
      expect(t.totalOf('b')).to.equal(0);
    });

    it("a router's answers end its own entries oldest first, never another router's", () => {
      const t = new InflightTable();
      const changed: string[] = [];
      t.onChange((n) => changed.push(n));
      t.report('r1', 'a', 2, 100, 100);
      t.report('r2', 'a', 1, 110, 110);
      t.report('r1', 'a', 1, 120, 120);
      t.answered('r1', 'a', 3);
      expect(t.sharesOf('a')).to.deep.equal([{ router_id: 'r2', count: 1, prompts: [], prompt_seqs: [] }]);
      t.answered('r1', 'a', 1); // nothing of r1 left: no change
      t.answered('r3', 'b', 1);
      expect(changed).to.deep.equal(['a', 'a', 'a', 'a']);
      t.report('r1', 'a', 1, 130, 130);
      t.loadReported('a', 125);
      expect(t.sharesOf('a')).to.deep.equal([{ router_id: 'r1', count: 1, prompts: [], prompt_seqs: [] }]);
    });

    it('a report dated earlier than the newest entry (a slower router) is placed by its date', () => {
      const t = new InflightTable();
      t.report('r1', 'a', 1, 200, 200);
      t.report('r2', 'a', 1, 100, 201);
      t.loadReported('a', 150);
      expect(t.sharesOf('a')).to.deep.equal([{ router_id: 'r1', count: 1, prompts: [], prompt_seqs: [] }]);
    });
  });

    it("a decision dated before the instance's latest load report is not added: that report reflects it", () => {
      const t = new InflightTable();
      t.loadReported('a', 200);
      t.report('r1', 'a', 1, 190, 205); // crossed the report on its way
      expect(t.sharesOf('a')).to.deep.equal([]);
      t.report('r1', 'a', 1, 210, 211);
      expect(t.totalOf('a')).to.equal(1);
      t.forget('a');
      t.report('r1', 'a', 1, 100, 212); // a new engine behind the name: no report of it yet
      expect(t.totalOf('a')).to.equal(1);
    });

    it("pending prefixes: an entry keeps its decisions' prompts, answers end the oldest first, a share carries the newest PENDING_PROMPTS_PER_SHARE", () => {
      const t = new InflightTable();
      const p = (n: number): Buffer => Buffer.from([n, 0, 0, 0]);
      t.report('r1', 'a', 2, 100, 100, [p(1), p(2)]);
      t.report('r1', 'a', 1, 110, 110, [p(3)]);
      t.report('r2', 'a', 2, 120, 120, [p(9)]); // fewer prompts than decisions (a router without them for one)
      expect(t.sharesOf('a')).to.deep.equal([
        { router_id: 'r1', count: 3, prompts: [p(1), p(2), p(3)], prompt_seqs: [0, 1, 2] },
        { router_id: 'r2', count: 2, prompts: [p(9)], prompt_seqs: [3] },
      ]);
      t.answered('r1', 'a', 1);
      expect(t.sharesOf('a')[0]).to.deep.equal({ router_id: 'r1', count: 2, prompts: [p(2), p(3)], prompt_seqs: [1, 2] });
      t.answered('r2', 'a', 1); // the prompt-less decision is the oldest; the one prompt left may be either's: kept
      expect(t.sharesOf('a')[1]).to.deep.equal({ router_id: 'r2', count: 1, prompts: [p(9)], prompt_seqs: [3] });
      const many = Array.from({ length: PENDING_PROMPTS_PER_SHARE + 5 }, (_, i) => p(i));
      t.report('r3', 'b', many.length, 130, 130, many);
      expect(t.sharesOf('b')[0]!.prompts).to.deep.equal(many.slice(5));
      // Claim order (routing.md "In-flight load"): each prompt numbered in arrival order.
      expect(t.sharesOf('b')[0]!.prompt_seqs).to.deep.equal(Array.from({ length: PENDING_PROMPTS_PER_SHARE }, (_, i) => 4 + i));
    });

    it("a withdrawn decision (claim order moved it) ends exactly its prompt and one count, not the router's oldest; a seq already ended ends nothing", () => {
      const t = new InflightTable();
      const p = (n: number): Buffer => Buffer.from([n, 0, 0, 0]);
      t.report('r1', 'a', 2, 100, 100, [p(1), p(2)]); // seqs 0, 1
      t.report('r2', 'a', 1, 105, 105, [p(7)]); // seq 2
      t.report('r1', 'a', 1, 110, 110, [p(3)]); // seq 3: the claim r1 moves
      t.withdrawn('r1', 'a', [3]);
      expect(t.sharesOf('a')).to.deep.equal([
        { router_id: 'r1', count: 2, prompts: [p(1), p(2)], prompt_seqs: [0, 1] },
        { router_id: 'r2', count: 1, prompts: [p(7)], prompt_seqs: [2] },
      ]);
      // Another router's seq, an unknown seq, the same seq again: nothing ends.
      t.withdrawn('r1', 'a', [2, 99, 3]);
      expect(t.totalOf('a')).to.equal(3);
      // From the middle of an entry: that prompt goes, the rest of the entry stays.
      t.withdrawn('r1', 'a', [0]);
      expect(t.sharesOf('a')[0]).to.deep.equal({ router_id: 'r1', count: 1, prompts: [p(2)], prompt_seqs: [1] });
      t.withdrawn('r2', 'a', [2]);
      t.withdrawn('r1', 'a', [1]);
      expect(t.sharesOf('a')).to.deep.equal([]);
      expect(t.active).to.equal(false);
    });

    it('open claims: named in the share until they settle, are withdrawn or end; a load report ends the rest of their entry, not them; the TTL ends them', () => {
      const t = new InflightTable(INFLIGHT_TTL_MS, () => 0);
      const p = (n: number): Buffer => Buffer.from([n, 0, 0, 0]);
      t.report('r1', 'a', 3, 100, 100, [p(1), p(2), p(3)], [], [], [1, 2]); // seqs 0, 1, 2; 1 and 2 open
      t.report('r2', 'a', 1, 101, 101, [p(4)], [], [], [0]); // seq 3, open
      expect(t.sharesOf('a')).to.deep.equal([
        { router_id: 'r1', count: 3, prompts: [p(1), p(2), p(3)], prompt_seqs: [0, 1, 2], open_claim_seqs: [1, 2] },
        { router_id: 'r2', count: 1, prompts: [p(4)], prompt_seqs: [3], open_claim_seqs: [3] },
      ]);
      // Settled where it is: still counted, no longer open. Another router's seq settles nothing.
      t.settled('r1', 'a', [1, 3]);
      expect(t.sharesOf('a')[0]).to.deep.include({ count: 3, open_claim_seqs: [2] });
      expect(t.sharesOf('a')[1]).to.deep.include({ open_claim_seqs: [3] });
      // A load report ends what reached the engine; the open claims have not, and stay.
      t.loadReported('a', 150);
      expect(t.sharesOf('a')).to.deep.equal([
        { router_id: 'r1', count: 1, prompts: [p(3)], prompt_seqs: [2], open_claim_seqs: [2] },
        { router_id: 'r2', count: 1, prompts: [p(4)], prompt_seqs: [3], open_claim_seqs: [3] },
      ]);
      // A withdrawn claim (moved) is no longer open; once settled, the next load report ends it.
      t.withdrawn('r1', 'a', [2]);
      t.settled('r2', 'a', [3]);
      expect(t.sharesOf('a')).to.deep.equal([{ router_id: 'r2', count: 1, prompts: [p(4)], prompt_seqs: [3] }]);
      t.loadReported('a', 160);
      expect(t.active).to.equal(false);
      // The TTL ends an open claim whose router never settles it.
      t.report('r1', 'a', 1, 200, 200, [p(5)], [], [], [0]);
      t.expire(200 + INFLIGHT_TTL_MS);
      expect(t.sharesOf('a')).to.deep.equal([]);
    });

  describe('ReportInflight messages', () => {
    it('every field is checked with one line naming it', () => {
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a:1', count: 1, age_ms: 0 }] })).to.equal(null);
      expect(checkInflightReport({ router_id: '', decisions: [] })).to.match(/^router_id: /);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: '', count: 1, age_ms: 0 }] })).to.match(/^decisions\[0\]\.instance_name: /);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 0, age_ms: 0 }] })).to.match(/^decisions\[0\]\.count: .*got 0$/);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 1e9 }] })).to.match(/^decisions\[0\]\.age_ms: /);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 0, age_ms: 0, answered: 2 }] })).to.equal(null);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 0, age_ms: 0, answered: 0 }] })).to.match(/^decisions\[0\]\.count: .*got 0$/);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 0, answered: -1 }] })).to.match(/^decisions\[0\]\.answered: /);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 0, age_ms: 0, withdrawn_seqs: [0, 0xffffffff] }] })).to.equal(null);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 0, age_ms: 0, withdrawn_seqs: [] }] })).to.match(/^decisions\[0\]\.count: .*got 0$/);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 0, withdrawn_seqs: [1, -1] }] })).to.match(/^decisions\[0\]\.withdrawn_seqs\[1\]: expected a uint32, got -1$/);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 0, withdrawn_seqs: [2 ** 32] }] })).to.match(/^decisions\[0\]\.withdrawn_seqs\[0\]: /);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 0, withdrawn_seqs: 'x' as unknown as number[] }] })).to.match(/^decisions\[0\]\.withdrawn_seqs: expected at most/);
      const fp = Buffer.alloc(8);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 0, prompts: [fp] }] })).to.equal(null);
      const moved = (moved_claims: { prompt_index: number; seq: number }[]): string | null =>
        checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 2, age_ms: 0, prompts: [fp, fp], moved_claims }] });
      expect(moved([{ prompt_index: 1, seq: 0xffffffff }, { prompt_index: 0, seq: 0 }])).to.equal(null);
      expect(moved([{ prompt_index: 2, seq: 1 }])).to.match(/^decisions\[0\]\.moved_claims\[0\]\.prompt_index: expected a distinct index into prompts \(0\.\.1\), got 2$/);
      expect(moved([{ prompt_index: 0, seq: 1 }, { prompt_index: 0, seq: 2 }])).to.match(/^decisions\[0\]\.moved_claims\[1\]\.prompt_index: /);
      expect(moved([{ prompt_index: 0, seq: -1 }])).to.match(/^decisions\[0\]\.moved_claims\[0\]\.seq: expected a uint32, got -1$/);
      expect(moved([{ prompt_index: 0, seq: 1 }, { prompt_index: 1, seq: 2 }, { prompt_index: 1, seq: 3 }])).to.match(/^decisions\[0\]\.moved_claims: expected at most prompts \(2\) entries, got 3$/);
      const open = (open_claims: number[]): string | null => checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 2, age_ms: 0, prompts: [fp, fp], open_claims }] });
      expect(open([1, 0])).to.equal(null);
      expect(open([2])).to.match(/^decisions\[0\]\.open_claims\[0\]: expected a distinct index into prompts \(0\.\.1\), got 2$/);
      expect(open([0, 0])).to.match(/^decisions\[0\]\.open_claims\[1\]: /);
      expect(open([0, 1, 1])).to.match(/^decisions\[0\]\.open_claims: expected at most prompts \(2\) entries, got 3$/);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 0, age_ms: 0, settled_seqs: [0, 0xffffffff] }] })).to.equal(null);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 0, settled_seqs: [0.5] }] })).to.match(/^decisions\[0\]\.settled_seqs\[0\]: expected a uint32, got 0\.5$/);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 0, prompts: [fp, fp] }] })).to.match(/^decisions\[0\]\.prompts: expected at most count \(1\)/);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 0, prompts: [Buffer.alloc(6)] }] })).to.match(/^decisions\[0\]\.prompts\[0\]: expected a multiple of 4 bytes.*got 6 bytes$/);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ instance_name: 'a', count: 1, age_ms: 0, prompts: [Buffer.alloc(4 * MAX_PROMPT_GRANULES + 4)] }] })).to.match(/^decisions\[0\]\.prompts\[0\]: /);
    });
  });

  describe('TT9 prefill tokens (the TTFT policy\'s queued work)', () => {
    it('TT9 each decision\'s prefill tokens are summed per router share, with how many decisions carried them', () => {
      const t = new InflightTable();
      t.report('r1', 'a', 2, 100, 100, [], [300, 500]);
      t.report('r1', 'a', 1, 101, 101);
      t.report('r2', 'a', 3, 102, 102, [], [7, 8]);
      expect(t.sharesOf('a')).to.deep.equal([
        { router_id: 'r1', count: 3, prompts: [], prompt_seqs: [], prefill_tokens: '800', prefill_token_decisions: 2 },
        // More tokens than decisions keeps the newest; fewer belong to the newest decisions.
        { router_id: 'r2', count: 3, prompts: [], prompt_seqs: [], prefill_tokens: '15', prefill_token_decisions: 2 },
      ]);
      t.report('r3', 'b', 1, 103, 103, [], [1, 2, 3]);
      expect(t.sharesOf('b')[0]).to.include({ count: 1, prefill_tokens: '3', prefill_token_decisions: 1 });
    });

    it('TT9 answers end the oldest decisions and their tokens; a load report ends all of them; a withdrawn claim its own', () => {
      const t = new InflightTable();
      t.report('r1', 'a', 3, 100, 100, [], [100, 200, 300]);
      t.answered('r1', 'a', 1);
      expect(t.sharesOf('a')[0]).to.include({ count: 2, prefill_tokens: '500', prefill_token_decisions: 2 });
      t.loadReported('a', 150);
      expect(t.sharesOf('a')).to.deep.equal([]);
      const fp = (n: number): Buffer => Buffer.from([n, 0, 0, 0]);
      t.report('r1', 'a', 3, 200, 200, [fp(1), fp(2), fp(3)], [10, 20, 40]);
      const seqs = t.sharesOf('a')[0]!.prompt_seqs!;
      t.withdrawn('r1', 'a', [seqs[1]!]);
      expect(t.sharesOf('a')[0]).to.include({ count: 2, prefill_tokens: '50', prefill_token_decisions: 2 });
    });

    it('TT12 outstanding-prefill gauges: set, replaced, cleared by 0 requests or by the router\'s stream ending; load reports and the TTL leave them', () => {
      const t = new InflightTable();
      const changed: string[] = [];
      t.onChange((n) => changed.push(n));
      t.setOutstanding('r1', 'a', { tokens: '3000', requests: 2 });
      t.report('r2', 'a', 1, 100, 100);
      expect(t.sharesOf('a')).to.deep.equal([
        { router_id: 'r1', count: 0, prompts: [], prompt_seqs: [], outstanding_prefill: { tokens: '3000', requests: 2 } },
        { router_id: 'r2', count: 1, prompts: [], prompt_seqs: [] },
      ]);
      t.setOutstanding('r1', 'a', { tokens: '3000', requests: 2 });
      expect(changed).to.deep.equal(['a', 'a']);
      t.loadReported('a', 200);
      t.expire(1_000_000);
      expect(t.sharesOf('a')).to.deep.equal([{ router_id: 'r1', count: 0, prompts: [], prompt_seqs: [], outstanding_prefill: { tokens: '3000', requests: 2 } }]);
      t.setOutstanding('r1', 'a', { tokens: '1000', requests: 1 });
      t.setOutstanding('r1', 'b', { tokens: '50', requests: 1 });
      expect(t.sharesOf('a')[0]!.outstanding_prefill).to.deep.equal({ tokens: '1000', requests: 1 });
      t.setOutstanding('r1', 'a', { tokens: '0', requests: 0 });
      expect(t.sharesOf('a')).to.deep.equal([]);
      t.routerGone('r1');
      expect(t.sharesOf('b')).to.deep.equal([]);
      expect(t.active).to.equal(false);
    });

    it('TT12 ReportInflight: an outstanding_prefill gauge alone is a valid message; its fields are checked', () => {
      const d = { instance_name: 'a', count: 0, age_ms: 0 };
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { tokens: '12', requests: 1 } }] })).to.equal(null);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { tokens: '0', requests: 0 } }] })).to.equal(null);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { tokens: '-1', requests: 1 } }] })).to.equal('decisions[0].outstanding_prefill.tokens: expected an integer ≥ 0, got -1');
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { tokens: '1', requests: 1.5 } }] })).to.match(/^decisions\[0\]\.outstanding_prefill\.requests: /);
    });

    it('TT15 a gauge\'s head and last end: dated on the table\'s clock from the ages sent, folded back to ages when the share is built', () => {
      let now = 1000;
      const t = new InflightTable(undefined, () => now);
      t.setOutstanding('r1', 'a', { tokens: '3000', requests: 2, head_tokens: '2000', head_age_ms: 300, last_end_age_ms: 50 });
      expect(t.sharesOf('a')[0]!.outstanding_prefill).to.deep.equal({ tokens: '3000', requests: 2, head_tokens: '2000', head_age_ms: 300, last_end_age_ms: 50 });
      // Another router's decision refolds the share 40 ms later: the ages have grown by 40.
      now = 1040;
      t.report('r2', 'a', 1, 1040, 1040);
      expect(t.sharesOf('a')[0]!.outstanding_prefill).to.deep.equal({ tokens: '3000', requests: 2, head_tokens: '2000', head_age_ms: 340, last_end_age_ms: 90 });
      // No first token seen yet stays "none"; a gauge without a head carries none.
      t.setOutstanding('r1', 'a', { tokens: '3000', requests: 2, head_tokens: '2000', head_age_ms: 10, last_end_age_ms: NO_LAST_END });
      expect(t.sharesOf('a')[0]!.outstanding_prefill).to.include({ head_age_ms: 10, last_end_age_ms: NO_LAST_END });
      t.setOutstanding('r1', 'a', { tokens: '3000', requests: 2 });
      expect(t.sharesOf('a')[0]!.outstanding_prefill).to.deep.equal({ tokens: '3000', requests: 2 });
    });

    it('TT15 a share re-sent with nothing of it changed carries its gauges\' ages as of that moment, not as of its fold', () => {
      let now = 1000;
      const t = new InflightTable(undefined, () => now);
      // r1's 80k-token head was sent 300 ms ago; r2 finished its last request there 500 ms ago.
      t.setOutstanding('r1', 'a', { tokens: '80000', requests: 1, head_tokens: '80000', head_age_ms: 300, last_end_age_ms: 5000 });
      t.setOutstanding('r2', 'a', { tokens: '0', requests: 0, last_end_age_ms: 500 });
      // The view carries the instance again 2 s later (a load report, KV events), no gauge changed:
      // the head is 2.3 s old by now, and the engine has been on it all that time.
      now = 3000;
      const [r1, r2] = t.sharesOf('a');
      expect(r1!.outstanding_prefill).to.include({ head_age_ms: 2300, last_end_age_ms: 7000 });
      expect(r2!.outstanding_prefill).to.include({ last_end_age_ms: 2500 });
      // Counts are the fold's: nothing else moves.
      expect(t.totalOf('a')).to.equal(0);
      expect(r1!.count).to.equal(0);
    });

    it(`TT15 a gauge emptied with its last first token stays with no request, dated as ages, ${LAST_END_KEEP_MS} ms; without one it clears`, () => {
      let now = 1000;
      const t = new InflightTable(undefined, () => now);
      t.setOutstanding('r1', 'a', { tokens: '3000', requests: 1, head_tokens: '3000', head_age_ms: 300, last_end_age_ms: NO_LAST_END });
      t.setOutstanding('r1', 'a', { tokens: '0', requests: 0, last_end_age_ms: 20 });
      expect(t.sharesOf('a')).to.deep.equal([{ router_id: 'r1', count: 0, prompts: [], prompt_seqs: [], outstanding_prefill: { tokens: '0', requests: 0, last_end_age_ms: 20 } }]);
      now = 1100;
      t.report('r2', 'a', 1, 1100, 1100);
      expect(t.sharesOf('a')[0]!.outstanding_prefill).to.deep.equal({ tokens: '0', requests: 0, last_end_age_ms: 120 });
      // Load reports and the TTL leave it; LAST_END_KEEP_MS after that first token it goes.
      t.loadReported('a', 1200);
      t.expire(980 + LAST_END_KEEP_MS - 1);
      expect(t.sharesOf('a').map((s) => s.router_id)).to.deep.equal(['r1']);
      t.expire(980 + LAST_END_KEEP_MS + 1);
      expect(t.sharesOf('a')).to.deep.equal([]);
      expect(t.active).to.equal(false);
      // A new request replaces it; emptied with no first token ever seen, it clears at once.
      t.setOutstanding('r1', 'b', { tokens: '0', requests: 0, last_end_age_ms: 0 });
      t.setOutstanding('r1', 'b', { tokens: '10', requests: 1, head_tokens: '10', head_age_ms: 0, last_end_age_ms: 5 });
      expect(t.sharesOf('b')[0]!.outstanding_prefill).to.include({ requests: 1, last_end_age_ms: 5 });
      t.setOutstanding('r1', 'b', { tokens: '0', requests: 0, last_end_age_ms: NO_LAST_END });
      expect(t.sharesOf('b')).to.deep.equal([]);
    });

    it('TT17 a gauge\'s prompts are relayed with it, and replaced or cleared with it', () => {
      const t = new InflightTable(undefined, () => 0);
      const fp = (n: number): Buffer => Buffer.from([n, 0, 0, 0]);
      t.setOutstanding('r1', 'a', { tokens: '30', requests: 2, head_tokens: '10', head_age_ms: 0, last_end_age_ms: NO_LAST_END, prompts: [fp(1), fp(2)] });
      expect(t.sharesOf('a')[0]!.outstanding_prefill!.prompts).to.deep.equal([fp(1), fp(2)]);
      t.setOutstanding('r1', 'a', { tokens: '20', requests: 1, head_tokens: '20', head_age_ms: 0, last_end_age_ms: 0, prompts: [fp(2)] });
      expect(t.sharesOf('a')[0]!.outstanding_prefill!.prompts).to.deep.equal([fp(2)]);
      expect(t.sharesOf('a')[0]!.outstanding_prefill).to.not.have.property('prompt_tokens');
      // Each prompt's prefill tokens travel with it (claim order reads them), and go with it.
      t.setOutstanding('r1', 'a', { tokens: '30', requests: 2, head_tokens: '10', head_age_ms: 0, last_end_age_ms: NO_LAST_END, prompts: [fp(1), fp(2)], prompt_tokens: [10, 20] });
      expect(t.sharesOf('a')[0]!.outstanding_prefill).to.include({ tokens: '30' }).and.deep.include({ prompts: [fp(1), fp(2)], prompt_tokens: [10, 20] });
      t.setOutstanding('r1', 'a', { tokens: '0', requests: 0, last_end_age_ms: 0, prompts: [], prompt_tokens: [] });
      expect(t.sharesOf('a')[0]!.outstanding_prefill).to.deep.equal({ tokens: '0', requests: 0, last_end_age_ms: 0 });
      t.setOutstanding('r1', 'a', { tokens: '0', requests: 0 });
      expect(t.sharesOf('a')).to.deep.equal([]);
    });

    it('TT15 ReportInflight: a gauge\'s head is at most its tokens, its ages uint32s', () => {
      const d = { instance_name: 'a', count: 0, age_ms: 0 };
      const g = { tokens: '100', requests: 2 };
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, head_tokens: '100', head_age_ms: 5, last_end_age_ms: NO_LAST_END } }] })).to.equal(null);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, head_tokens: '101' } }] })).to.equal(
        'decisions[0].outstanding_prefill.head_tokens: expected an integer in [0, tokens (100)], got 101',
      );
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, head_tokens: '5', head_age_ms: -1 } }] })).to.equal('decisions[0].outstanding_prefill.head_age_ms: expected a uint32, got -1');
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, head_tokens: '5', last_end_age_ms: 2 ** 32 } }] })).to.equal(
        'decisions[0].outstanding_prefill.last_end_age_ms: expected a uint32, got 4294967296',
      );
      // TT17: at most one prompt per request (and 8), each fingerprints.
      const fp = Buffer.from([1, 0, 0, 0]);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, prompts: [fp, fp] } }] })).to.equal(null);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, prompts: [fp, fp, fp] } }] })).to.equal(
        'decisions[0].outstanding_prefill.prompts: expected at most 2 entries (requests, at most 8), got 3',
      );
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, prompts: [Buffer.from([1, 2, 3])] } }] })).to.match(/^decisions\[0\]\.outstanding_prefill\.prompts\[0\]: expected a multiple of 4 bytes/);
      // Each prompt's prefill tokens (older routers send none): one per prompt, none beyond the gauge's tokens.
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, prompts: [fp, fp], prompt_tokens: [60, 40] } }] })).to.equal(null);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, prompts: [fp, fp], prompt_tokens: [60] } }] })).to.equal(
        'decisions[0].outstanding_prefill.prompt_tokens: expected none or one per prompt (2), got 1',
      );
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, outstanding_prefill: { ...g, prompts: [fp], prompt_tokens: [101] } }] })).to.equal(
        'decisions[0].outstanding_prefill.prompt_tokens[0]: expected an integer in [0, tokens (100)], got 101',
      );
    });

    it('TT9 ReportInflight: prefill_tokens holds at most count uint32s', () => {
      const d = { instance_name: 'a', count: 2, age_ms: 0 };
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, prefill_tokens: [0, 0xffffffff] }] })).to.equal(null);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, prefill_tokens: [1, 2, 3] }] })).to.match(/^decisions\[0\]\.prefill_tokens: expected at most count \(2\) entries, got 3$/);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, prefill_tokens: [1, -1] }] })).to.equal('decisions[0].prefill_tokens[1]: expected a uint32, got -1');
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, prefill_tokens: [1.5] }] })).to.match(/^decisions\[0\]\.prefill_tokens\[0\]: /);
      expect(checkInflightReport({ router_id: 'r', decisions: [{ ...d, prefill_tokens: 'x' as unknown as number[] }] })).to.match(/^decisions\[0\]\.prefill_tokens: /);
    });
  });

  describe('InflightService into the view', () => {
    let mono: number;
    let publisher: ViewPublisher;
    let service: InflightService;
    let instances: Instances;
    let sent: Buffer[];

    beforeEach(() => {
      mono = 10_000;
      instances = new Instances();
      instances.table.put(registration('a:1'), 0);
      instances.table.put(registration('b:1'), 0);
      publisher = new ViewPublisher({ flushIntervalMs: 3_600_000, epoch: 'e', nowMs: () => 0 });
      publisher.attachInstanceTable(instances);
      service = new InflightService(instances, { monotonicMs: () => mono, expiryIntervalMs: 3_600_000 });
      publisher.attachInflight(service);
      instances.heartbeat('a:1', 0);
      instances.heartbeat('b:1', 0);
      // The decisions below come after those load reports (older ones are reflected by them).
      mono += 1000;
      sent = [];
      const sink: ViewSink = { write: (b) => sent.push(b) > 0, onDrain: () => undefined, end: () => undefined };
      publisher.watch({ routerId: 'w', epoch: '', version: 0 }, sink);
      publisher.flush();
    });

    afterEach(() => {
      service.close();
      publisher.close();
    });

    const last = (): DecodedViewUpdate => decodeViewUpdate(sent.at(-1)!);
    const upsertOf = (u: DecodedViewUpdate, name: string) => u.delta!.instance_upserts.find((i) => i.name === name);

    it('a report becomes an upsert of the instance carrying every router\'s share; unknown instances are dropped', () => {
      service.report({ router_id: 'r1', decisions: [{ instance_name: 'a:1', count: 2, age_ms: 0 }, { instance_name: 'ghost:1', count: 9, age_ms: 0 }] });
      service.report({ router_id: 'r2', decisions: [{ instance_name: 'a:1', count: 1, age_ms: 5 }] });
      publisher.flush();
      const u = last();
      expect(u.delta!.instance_upserts.map((i) => i.name)).to.deep.equal(['a:1']);
      expect(upsertOf(u, 'a:1')!.inflight).to.deep.equal([{ router_id: 'r1', count: 2, prompts: [], prompt_seqs: [], prefill_tokens: '0', prefill_token_decisions: 0, outstanding_prefill: null, open_claim_seqs: [] }, { router_id: 'r2', count: 1, prompts: [], prompt_seqs: [], prefill_tokens: '0', prefill_token_decisions: 0, outstanding_prefill: null, open_claim_seqs: [] }]);
      expect(service.sharesOf('ghost:1')).to.deep.equal([]);
    });

    it('a newer heartbeat ends the entries in the same delta that carries its load', () => {
      service.report({ router_id: 'r1', decisions: [{ instance_name: 'a:1', count: 3, age_ms: 0 }] });
      publisher.flush();
      mono += 100;
      instances.heartbeat('a:1', 3);
      publisher.flush();
      const a = upsertOf(last(), 'a:1')!;
      expect(a.load!.waiting_requests_num).to.equal('3');
      expect(a.inflight).to.deep.equal([]);
    });

    it("a router's answers end its share in the next delta; an answer in the same message as its decision nets out", () => {
      service.report({ router_id: 'r1', decisions: [{ instance_name: 'a:1', count: 2, age_ms: 0 }] });
      service.report({ router_id: 'r2', decisions: [{ instance_name: 'a:1', count: 1, age_ms: 0 }] });
      publisher.flush();
      service.report({ router_id: 'r1', decisions: [{ instance_name: 'a:1', count: 0, age_ms: 0, answered: 1 }] });
      publisher.flush();
      expect(upsertOf(last(), 'a:1')!.inflight).to.deep.equal([{ router_id: 'r1', count: 1, prompts: [], prompt_seqs: [], prefill_tokens: '0', prefill_token_decisions: 0, outstanding_prefill: null, open_claim_seqs: [] }, { router_id: 'r2', count: 1, prompts: [], prompt_seqs: [], prefill_tokens: '0', prefill_token_decisions: 0, outstanding_prefill: null, open_claim_seqs: [] }]);
      service.report({ router_id: 'r2', decisions: [{ instance_name: 'b:1', count: 1, age_ms: 0, answered: 1 }] });
      expect(service.sharesOf('b:1')).to.deep.equal([]);
    });

    it("a router's withdrawn claim leaves its share in the same delta as its decision elsewhere (claim order)", () => {
      const fp = (n: number): Buffer => Buffer.from([n, 0, 0, 0]);
      service.report({ router_id: 'r1', decisions: [{ instance_name: 'a:1', count: 2, age_ms: 0, prompts: [fp(1), fp(2)] }] });
      publisher.flush();
      const seqs = upsertOf(last(), 'a:1')!.inflight![0]!.prompt_seqs!;
      service.report({
        router_id: 'r1',
        decisions: [
          { instance_name: 'a:1', count: 0, age_ms: 0, withdrawn_seqs: [seqs[1]!] },
          { instance_name: 'b:1', count: 1, age_ms: 0, prompts: [fp(2)] },
        ],
      });
      publisher.flush();
      const u = last();
      expect(upsertOf(u, 'a:1')!.inflight).to.deep.equal([{ router_id: 'r1', count: 1, prompts: [fp(1)], prompt_seqs: [seqs[0]!], prefill_tokens: '0', prefill_token_decisions: 0, outstanding_prefill: null, open_claim_seqs: [] }]);
      expect(upsertOf(u, 'b:1')!.inflight![0]).to.include({ router_id: 'r1', count: 1 });
    });

    it('a moved claim keeps its place in the order on the instance it went to; the next new decision is numbered after it all the same', () => {
      const fp = (n: number): Buffer => Buffer.from([n, 0, 0, 0]);
      service.report({ router_id: 'r1', decisions: [{ instance_name: 'a:1', count: 2, age_ms: 0, prompts: [fp(1), fp(2)] }] });
      service.report({ router_id: 'r2', decisions: [{ instance_name: 'a:1', count: 1, age_ms: 0, prompts: [fp(3)] }] });
      publisher.flush();
      const [r1, r2] = upsertOf(last(), 'a:1')!.inflight!;
      const [first, moved] = r1!.prompt_seqs!;
      service.report({
        router_id: 'r1',
        decisions: [
          { instance_name: 'a:1', count: 0, age_ms: 0, withdrawn_seqs: [moved!] },
          { instance_name: 'b:1', count: 2, age_ms: 0, prompts: [fp(4), fp(2)], moved_claims: [{ prompt_index: 1, seq: moved! }] },
        ],
      });
      publisher.flush();
      const onB = upsertOf(last(), 'b:1')!.inflight![0]!;
      // fp(4) is new: numbered after r2's claim, which came after both of r1's first ones.
      expect(onB.prompts).to.deep.equal([fp(4), fp(2)]);
      expect(onB.prompt_seqs).to.deep.equal([r2!.prompt_seqs![0]! + 1, moved]);
      expect(moved).to.equal(first! + 1);
      expect(upsertOf(last(), 'a:1')!.inflight!.find((s) => s.router_id === 'r1')!.prompt_seqs).to.deep.equal([first]);
    });

    it(`the TTL: ${INFLIGHT_TTL_MS} ms after the decision (dated by the router's age) the share leaves the view`, () => {
      service.report({ router_id: 'r1', decisions: [{ instance_name: 'b:1', count: 1, age_ms: 500 }] });
      publisher.flush();
      mono += INFLIGHT_TTL_MS - 501;
      service.table.expire(mono);
      expect(service.sharesOf('b:1')).to.have.length(1);
      mono += 1;
      service.table.expire(mono);
      publisher.flush();
      expect(upsertOf(last(), 'b:1')!.inflight).to.deep.equal([]);
    });

    it('a fresh watch gets the shares in its snapshot', () => {
      service.report({ router_id: 'r1', decisions: [{ instance_name: 'b:1', count: 4, age_ms: 0 }] });
      publisher.flush();
      const snap: Buffer[] = [];
      publisher.watch({ routerId: 'w2', epoch: '', version: 0 }, { write: (b) => snap.push(b) > 0, onDrain: () => undefined, end: () => undefined });
      const s = decodeViewUpdate(snap[0]!);
      expect(s.snapshot!.instances.find((i) => i.name === 'b:1')!.inflight).to.deep.equal([{ router_id: 'r1', count: 4, prompts: [], prompt_seqs: [], prefill_tokens: '0', prefill_token_decisions: 0, outstanding_prefill: null, open_claim_seqs: [] }]);
    });

    it('a view sent as snapshot parts carries the shares in part 0 (a snapshot above the message bound)', () => {
      const chunked = new ViewPublisher({ flushIntervalMs: 3_600_000, epoch: 'e', nowMs: () => 0, maxMessageBytes: 64 });
      chunked.attachInstanceTable(instances);
      chunked.attachInflight(service);
      try {
        service.report({ router_id: 'r1', decisions: [{ instance_name: 'b:1', count: 4, age_ms: 0 }] });
        chunked.flush();
        const snap: Buffer[] = [];
        chunked.watch({ routerId: 'w2', epoch: '', version: 0 }, { write: (b) => snap.push(b) > 0, onDrain: () => undefined, end: () => undefined });
        const part = decodeViewUpdate(snap[0]!);
        expect(part.body).to.equal('snapshot_chunk');
        expect(part.snapshot_chunk!.index).to.equal(0);
        expect(part.snapshot_chunk!.instances.find((i) => i.name === 'b:1')!.inflight).to.deep.equal([{ router_id: 'r1', count: 4, prompts: [], prompt_seqs: [], prefill_tokens: '0', prefill_token_decisions: 0, outstanding_prefill: null, open_claim_seqs: [] }]);
      } finally {
        chunked.close();
      }
    });
  });
});
