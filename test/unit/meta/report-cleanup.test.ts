// kvcm-meta §7.11 cleanup that stays linear and never stalls the service (issue 16), on a real
// SQLite file: the tombstone cleanup of 20,000 locations pages by keyset and yields between
// pages, so a lookup issued after it started is answered before it ends, and every row is
// deleted exactly once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { silentLogger } from '../../../shared/log/logger.js';
import { ReportCleanup } from '../../../meta-svc/report/report-cleanup.js';
import { formatReportLocationId } from '../../../meta-svc/report/report-location-id.js';
import { ReporterRegistry, type ReporterIdentity } from '../../../meta-svc/report/reporter-registry.js';
import { CLS_SERVING, type MetaStore, type StoreMutation } from '../../../meta-svc/store/meta-store.js';
import { SqliteMetaStore } from '../../../meta-svc/store/sqlite-meta-store.js';

const ID: ReporterIdentity = { instanceId: 'i', storageType: 8, hostIpPort: 'h:1', storageName: 'event_report_l2' };
const ROWS = 20000;

describe('kvcm-meta §7.11 cleanup: bounded work per tick', () => {
  let dir: string;
  let store: MetaStore;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kvcm-cleanup-'));
    store = SqliteMetaStore.open(join(dir, 'kvcm.db'));
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a tombstone cleanup of 20,000 locations deletes each once while a lookup started after it is answered first', async () => {
    const locationId = formatReportLocationId(8, 'gpu', ID.hostIpPort);
    const muts: StoreMutation[] = [];
    for (let k = 0; k < ROWS; k++) {
      muts.push({
        op: 'putLocation',
        instanceId: ID.instanceId,
        blockKey: BigInt(k),
        location: { locationId, storageName: ID.storageName, type: 8, status: CLS_SERVING, createTimeUs: 1n, specs: [{ name: 'tp0', uri: `x://h/${k}` }] },
      });
    }
    await store.apply(muts);
    const registry = new ReporterRegistry();
    let deleted = 0;
    const cleanup = new ReportCleanup({ store, registry, logger: silentLogger, onDeleted: (_reason, n) => (deleted += n) });
    registry.register(ID, ['gpu'], 0);
    registry.hostDown(ID, 1); // queues the tombstone cleanup

    const order: string[] = [];
    const done = cleanup.idle().then(() => order.push('cleanup'));
    await new Promise((resolve) => setImmediate(resolve));
    const lookup = store.getBlocks(ID.instanceId, [BigInt(ROWS - 1)]).then((b) => {
      order.push('lookup');
      return b;
    });
    await Promise.all([done, lookup]);
    expect(order).to.deep.equal(['lookup', 'cleanup']);
    expect(deleted).to.equal(ROWS);
    expect((await store.scanLocations(ID.instanceId, {}, null, 10)).items).to.deep.equal([]);
  });
});
