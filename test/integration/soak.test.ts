/**
 * Soak, short form (test/chaos/soak-run.ts; the full form is `npm run soak`, SOAK_SECONDS=1800):
 * 30 s of churn (evictions and Host offloads on every engine) through two CAR routers, heap and
 * RSS of the directory and router-1 sampled every second. Once the index is full, the slope over
 * the second half must stay under a generous bound (heap 2 MiB/s: GC saw-tooth over a few seconds
 * is noise; RSS 4 MiB/s: V8 still grows its spaces during the first minute, ~20 MiB in the full
 * soak, then stays flat; a per-request leak at this rate, ~90 requests/s, would still show), no
 * request may fail, and every stream ends synchronized.
 */
import { expect } from 'chai';
import { SERIES, runSoak, soakSummary, type SeriesName, type SoakReport } from '../chaos/soak-run.js';

const SECONDS = 30;
const MAX_SLOPE_KIB_S: Readonly<Record<SeriesName, number>> = { directoryHeap: 2048, routerHeap: 2048, directoryRss: 4096, routerRss: 4096 };

describe('soak (short form): memory of the directory and a router stays flat under churn', function () {
  this.timeout(4 * 60 * 1000);
  let report: SoakReport;

  before(async () => {
    report = await runSoak({ seconds: SECONDS, sampleMs: 1000, seed: 11, log: () => undefined });
    console.log(soakSummary(report));
  });

  it('churn really happened: the index filled, Host holds offloaded blocks, nothing failed, every stream synchronized', () => {
    expect(report.fullAfterS).to.not.equal(null);
    expect(report.requests).to.be.greaterThan(100);
    expect(report.failed).to.equal(0);
    expect(report.streams).to.have.length(3);
    for (const s of report.streams) {
      expect(s.synchronized, s.instance).to.equal(true);
      expect(s.hostBlocks, s.instance).to.be.greaterThan(0);
    }
  });

  it('heap and RSS slopes over the second half after the index filled are below the bounds (KiB/s)', () => {
    expect(report.fittedSamples).to.be.greaterThan(3);
    for (const k of SERIES) {
      expect(Number.isFinite(report.slopeKiBs[k]), k).to.equal(true);
      expect(Math.abs(report.slopeKiBs[k]), k).to.be.lessThan(MAX_SLOPE_KIB_S[k]);
    }
  });
});
