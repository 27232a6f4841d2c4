// architecture.md "The view stream": the bounded change log behind resumable watches. Bounded by
// count AND bytes, oldest first, the newest entry always kept; resume is possible exactly when
// every version after the router's is still held.
import { expect } from 'chai';
import { ChangeLog } from '../../../directory-svc/view/change-log.js';

const bytes = (n: number): Buffer => Buffer.alloc(n, 1);

describe('view stream change log', () => {
  it('resume inside the log: every version after the asked one is held, in order', () => {
    const log = new ChangeLog({ maxEntries: 8, maxBytes: 1 << 20 });
    expect(log.canResumeFrom(0)).to.equal(true); // nothing published yet, nothing missed
    for (let v = 1; v <= 5; v++) log.append(v, bytes(v));
    expect(log.oldestVersion).to.equal(1);
    expect(log.newestVersion).to.equal(5);
    for (let v = 0; v <= 5; v++) expect(log.canResumeFrom(v), `from ${v}`).to.equal(true);
    expect(log.get(3)!.bytes.length).to.equal(3);
    expect(log.get(6)).to.equal(null);
  });

  it('resume outside the log: evicted versions and future versions are refused', () => {
    const log = new ChangeLog({ maxEntries: 3, maxBytes: 1 << 20 });
    for (let v = 1; v <= 10; v++) log.append(v, bytes(10));
    expect(log.size).to.equal(3);
    expect(log.oldestVersion).to.equal(8);
    expect(log.canResumeFrom(6)).to.equal(false); // needs 7, evicted
    expect(log.canResumeFrom(7)).to.equal(true);
    expect(log.canResumeFrom(10)).to.equal(true);
    expect(log.canResumeFrom(11)).to.equal(false); // a version this epoch never reached
    expect(log.get(7)).to.equal(null);
    expect(log.get(8)!.version).to.equal(8);
  });

  it('byte bound: the oldest entries leave until the total fits, the newest always stays', () => {
    const log = new ChangeLog({ maxEntries: 100, maxBytes: 100 });
    for (let v = 1; v <= 4; v++) log.append(v, bytes(30));
    expect(log.size).to.equal(3);
    expect(log.byteSize).to.equal(90);
    expect(log.append(5, bytes(80))).to.equal(3);
    expect(log.size).to.equal(1);
    expect(log.byteSize).to.equal(80);
    // One entry larger than the bound is still kept: a caught-up watcher must get it.
    log.append(6, bytes(500));
    expect(log.size).to.equal(1);
    expect(log.oldestVersion).to.equal(6);
    expect(log.get(6)!.bytes.length).to.equal(500);
  });

  it('refuses a version that is not the next one', () => {
    const log = new ChangeLog({ maxEntries: 2, maxBytes: 10 });
    log.append(1, bytes(1));
    expect(() => log.append(3, bytes(1))).to.throw(RangeError);
  });
});
