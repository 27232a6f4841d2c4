// `GET /v1/status` as built from a view cache (router-svc/status/status-snapshot.ts): instances with
// role, state and load; streams with residency per tier (a block on both tiers counts on each, as
// the query endpoint's device_blocks/host_blocks do); view staleness; the hit-ratio series.
import { expect } from 'chai';
import { HitRatioSeries } from '../../../router-svc/status/hit-ratio-series.js';
import { buildStatus } from '../../../router-svc/status/status-snapshot.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { BOTH, DEVICE, HOST, apply, blockKeys, residency, snapshot, tokens, wireInstance, wireLoad, wireStream } from './view-fixtures.js';

const STALE_AFTER_MS = 3000;

describe('status page JSON (/v1/status)', () => {
  it('reports instances, streams with device/host blocks, the view and the hit-ratio points', async () => {
    const view = new ViewCache({ staleAfterMs: STALE_AFTER_MS });
    const k = await blockKeys(tokens(16));
    await apply(
      view,
      snapshot(
        'e1',
        12,
        [
          wireInstance('b:2', { type: 'MIX', current_role: 'DECODE', load: wireLoad(5, 0.25) }),
          wireInstance('a:1', { state: 'SUSPECT', schedulable: false }),
        ],
        [
          wireStream(1, 'a:1', { sequence: '41', ...residency([k[0]!, k[1]!, k[2]!], [DEVICE, BOTH, HOST]) }),
          wireStream(2, 'b:2', { synchronized: false, sequence: '-1', error: 'gap: seq 9 after 7' }),
        ],
      ),
      1000,
    );
    const series = new HitRatioSeries({ intervalMs: 0 });
    series.record(0.75);
    series.tick(1500);

    const s = buildStatus({ view, hitRatios: series, policyName: 'CAR' }, 1200);
    expect(s.policy).to.deep.equal({ name: 'CAR' });
    expect(s.view).to.deep.equal({ epoch: 'e1', version: '12', stale: false, stale_reason: '', since_heard_ms: 200 });
    expect(s.instances.map((i) => [i.name, i.type, i.role, i.state, i.schedulable, i.candidate])).to.deep.equal([
      ['a:1', 'DEFAULT', '', 'SUSPECT', false, false],
      ['b:2', 'MIX', 'DECODE', 'ACTIVE', true, true],
    ]);
    expect(s.instances[1]!.load).to.include({ waiting_requests_num: 5, gpu_cache_usage_perc: 0.25 });
    expect(s.instances[1]!.incarnation_id).to.equal('inc-b:2');
    expect(s.streams).to.deep.equal([
      { instance_name: 'a:1', dp_rank: 0, block_size: 4, synchronized: true, sequence: '41', error: '', device_blocks: 2, host_blocks: 2, incarnation_id: 'inc-a:1' },
      { instance_name: 'b:2', dp_rank: 0, block_size: 4, synchronized: false, sequence: '-1', error: 'gap: seq 9 after 7', device_blocks: 0, host_blocks: 0, incarnation_id: 'inc-b:2' },
    ]);
    expect(s.hit_ratio).to.deep.equal({ interval_ms: 0, decisions: 1, points: [{ t_ms: 1500, mean: 0.75, max: 0.75, count: 1 }] });
    // Plain JSON: every field survives a round trip (no bigint).
    expect(JSON.parse(JSON.stringify(s))).to.deep.equal(s);
  });

  it('a silent directory makes the view stale, with the time since it was last heard', async () => {
    const view = new ViewCache({ staleAfterMs: STALE_AFTER_MS });
    await apply(view, snapshot('e1', 3, [wireInstance('a:1')], [wireStream(1, 'a:1')]), 1000);
    const s = buildStatus({ view, hitRatios: new HitRatioSeries({ intervalMs: 0 }), policyName: 'RR' }, 1000 + STALE_AFTER_MS);
    expect(s.view.stale).to.equal(true);
    expect(s.view.since_heard_ms).to.equal(STALE_AFTER_MS);
    // The stream keeps its own state; the page shows the staleness beside it.
    expect(s.streams[0]!.synchronized).to.equal(true);
  });
});
