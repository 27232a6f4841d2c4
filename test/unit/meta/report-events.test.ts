/** kvcm-meta §7.3 request shapes and §7.4 item validation (V-03 and S-02 at unit level). */
import { expect } from 'chai';
import { isAllowedShape, normalizeMedium, parseReportBlockKey, validateEvent, type DecodedEvent } from '../../../meta-svc/report/report-events.js';

const addEv = (blockKey: string, specs = [{ name: 'tp0', uri: 'x://h/p' }], medium = 'gpu'): DecodedEvent => ({ eventType: 2, memberOk: true, blockKey, medium, specs });
const ev = (eventType: number): DecodedEvent => ({ eventType, memberOk: false });

describe('kvcm-meta §7.3/§7.4 reportEvent input checks', () => {
  it('V-03 block_key decimal rules; "18446744073709551615" ≡ "-1"', () => {
    expect(parseReportBlockKey('18446744073709551615')).to.equal(-1n);
    expect(parseReportBlockKey('-1')).to.equal(-1n);
    expect(parseReportBlockKey('9223372036854775808')).to.equal(-(2n ** 63n));
    expect(parseReportBlockKey('-9223372036854775808')).to.equal(-(2n ** 63n));
    expect(parseReportBlockKey('007')).to.equal(7n);
    for (const bad of ['+1', ' 1', '1 ', '', '-', '1.0', '1e3', '0x10', '18446744073709551616', '-9223372036854775809']) {
      expect(parseReportBlockKey(bad), bad).to.equal(null);
    }
  });

  it('V-01 medium: non-empty, ≤ 64 bytes, no #, lowercased', () => {
    expect(normalizeMedium('GPU')).to.equal('gpu');
    expect(normalizeMedium('')).to.equal(null);
    expect(normalizeMedium('a#b')).to.equal(null);
    expect(normalizeMedium('m'.repeat(64))).to.equal('m'.repeat(64));
    expect(normalizeMedium('m'.repeat(65))).to.equal(null);
    expect(normalizeMedium('é'.repeat(33))).to.equal(null);
  });

  it('V-03 specs and URIs', () => {
    expect(validateEvent(addEv('1'))).to.not.equal(null);
    expect(validateEvent(addEv('1', []))).to.equal(null);
    // D-08: spec names need not be registered, and may carry '#' (KVCM parity).
    expect(validateEvent(addEv('1', [{ name: 'zz', uri: 'x://h/p' }]))).to.not.equal(null);
    expect(validateEvent(addEv('1', [{ name: 'a#b', uri: 'x://h/p' }]))).to.not.equal(null);
    expect(validateEvent(addEv('1', [{ name: '', uri: 'x://h/p' }]))).to.equal(null);
    expect(validateEvent(addEv('1', [{ name: 'tp0', uri: 'x://h/p' }, { name: 'tp0', uri: 'x://h/q' }]))).to.equal(null);
    expect(validateEvent(addEv('1', [{ name: 'tp0', uri: 'x://h/p#frag' }]))).to.equal(null);
    expect(validateEvent(addEv('1', [{ name: 'tp0', uri: '1x://h/p' }]))).to.equal(null);
    expect(validateEvent(addEv('1', [{ name: 'tp0', uri: 'event_report://h/p' }]))).to.not.equal(null);
    expect(validateEvent(addEv('1', [{ name: 'tp0', uri: 'x://h/p?s_version=1' }]))).to.equal(null);
    expect(validateEvent({ eventType: 3, memberOk: true, blockKey: '1', medium: 'gpu', specNames: [] })).to.equal(null);
    expect(validateEvent({ eventType: 3, memberOk: true, blockKey: '1', medium: 'gpu', specNames: ['tp0', 'tp0'] })).to.equal(null);
  });

  it('S-02 snapshot: "1" and "01" collide under one medium; one key in two media is fine; blocks=[] valid', () => {
    const b = (blockKey: string, medium = 'gpu') => ({ blockKey, medium, specs: [{ name: 'tp0', uri: 'x://h/p' }] });
    expect(validateEvent({ eventType: 6, memberOk: true, blocks: [b('1'), b('01')] })).to.equal(null);
    expect(validateEvent({ eventType: 6, memberOk: true, blocks: [b('1'), b('1', 'GPU')] })).to.equal(null);
    expect(validateEvent({ eventType: 6, memberOk: true, blocks: [b('1'), b('1', 'disk')] })).to.not.equal(null);
    expect(validateEvent({ eventType: 6, memberOk: true, blocks: [] })).to.deep.equal({ kind: 'snapshot', blocks: [] });
  });

  it('V-02 a missing or extra params member, and EVENT_UNSPECIFIED, are invalid items', () => {
    expect(validateEvent({ ...addEv('1'), memberOk: false } as DecodedEvent)).to.equal(null);
    expect(validateEvent(ev(0))).to.equal(null);
    expect(validateEvent(ev(99))).to.equal(null);
  });

  it('S-07 shapes', () => {
    expect(isAllowedShape([ev(1), ev(5), ev(2), ev(3)], 100)).to.equal(true);
    expect(isAllowedShape([ev(1), ev(6), ev(5)], 100)).to.equal(true);
    expect(isAllowedShape([ev(6), ev(2)], 100)).to.equal(false);
    expect(isAllowedShape([ev(6), ev(6)], 100)).to.equal(false);
    expect(isAllowedShape([ev(4)], 100)).to.equal(true);
    expect(isAllowedShape([ev(4), ev(5)], 100)).to.equal(false);
    expect(isAllowedShape([ev(4), ev(4)], 100)).to.equal(false);
    expect(isAllowedShape([ev(5), ev(5), ev(5)], 2)).to.equal(false);
  });
});
