// kv-events §7.2 recovery buffer and §7.4 backoff, pure (no sockets, no clock).
import { expect } from 'chai';
import type { LiveBatch } from '../../../directory-svc/decoder/kv-batch.js';
import { isStreamError } from '../../../directory-svc/errors/stream-errors.js';
import type { StreamError } from '../../../directory-svc/errors/stream-errors.js';
import { BACKOFF_STABLE_MS, RecoveryBackoff, backoffDelayMs } from '../../../directory-svc/recovery/backoff.js';
import { RecoveryBuffer } from '../../../directory-svc/recovery/recovery-buffer.js';

function batch(seq: number, bufferCost = 100): LiveBatch {
  return { seq: BigInt(seq), ts: 0, dpRank: 0, events: [], bufferCost };
}

function thrown(fn: () => unknown): StreamError {
  try {
    fn();
  } catch (e: unknown) {
    if (isStreamError(e)) return e;
    throw e;
  }
  throw new Error('expected a StreamError');
}

function fill(buf: RecoveryBuffer, seqs: number[]): void {
  for (const s of seqs) buf.push(batch(s));
}

describe('kv-events §7.2 recovery buffer', () => {
  it('buffered 5,6,7,8 with W = 7 → 7 and 8', () => {
    const buf = new RecoveryBuffer(1 << 20);
    fill(buf, [5, 6, 7, 8]);
    expect(buf.suffixFrom(7n).map((b) => b.seq)).to.deep.equal([7n, 8n]);
  });

  it('buffered 5,6,8 with W = 7 → gap: expected 7, got 8', () => {
    const buf = new RecoveryBuffer(1 << 20);
    fill(buf, [5, 6, 8]);
    const e = thrown(() => buf.suffixFrom(7n));
    expect([e.class, e.detail]).to.deep.equal(['gap', 'expected 7, got 8']);
  });

  it('a hole after W is a gap too', () => {
    const buf = new RecoveryBuffer(1 << 20);
    fill(buf, [7, 8, 10]);
    const e = thrown(() => buf.suffixFrom(7n));
    expect([e.class, e.detail]).to.deep.equal(['gap', 'expected 9, got 10']);
  });

  it('nothing buffered, or everything below W → empty suffix', () => {
    expect(new RecoveryBuffer(1000).suffixFrom(7n)).to.deep.equal([]);
    const buf = new RecoveryBuffer(1000);
    fill(buf, [3, 4]);
    expect(buf.suffixFrom(7n)).to.deep.equal([]);
  });

  it('seqs must strictly increase (seq_reset)', () => {
    const buf = new RecoveryBuffer(1 << 20);
    fill(buf, [5, 6]);
    const e = thrown(() => buf.push(batch(6)));
    expect([e.class, e.detail]).to.deep.equal(['seq_reset', 'got 6 after 6']);
    expect(thrown(() => buf.push(batch(2))).class).to.equal('seq_reset');
    expect(buf.length).to.equal(2);
  });

  it('the byte budget is exact: reaching it is fine, exceeding it is limit: max_buffered_bytes', () => {
    const buf = new RecoveryBuffer(300);
    fill(buf, [1, 2, 3]);
    expect(buf.bytes).to.equal(300);
    const e = thrown(() => buf.push(batch(4, 1)));
    expect(e.class).to.equal('limit');
    expect(e.detail).to.match(/^max_buffered_bytes/);
    buf.clear();
    expect(buf.length).to.equal(0);
    expect(buf.bytes).to.equal(0);
  });
});

describe('kv-events §7.4 backoff', () => {
  it('n = 0 → immediate; d = min(10000, 100·2^(n−1)), delay in [d/2, d]', () => {
    expect(backoffDelayMs(0, () => 0.5)).to.equal(0);
    const cases: [number, number][] = [
      [1, 100],
      [2, 200],
      [3, 400],
      [7, 6400],
      [8, 10000],
      [40, 10000],
    ];
    for (const [n, d] of cases) {
      expect(backoffDelayMs(n, () => 0), `n=${n} low`).to.equal(d / 2);
      expect(backoffDelayMs(n, () => 0.999999), `n=${n} high`).to.be.closeTo(d, 0.01);
      expect(backoffDelayMs(n, () => 0.5), `n=${n} mid`).to.equal(0.75 * d);
    }
  });

  it('counts aborted recoveries and losses within 10 s of entering SYNCHRONIZED', () => {
    const b = new RecoveryBackoff();
    b.onRecoveryFailed();
    b.onRecoveryFailed();
    expect(b.failures).to.equal(2);
    b.onSynchronized(1000);
    b.onSyncLost(1000 + BACKOFF_STABLE_MS - 1);
    expect(b.failures).to.equal(3);
  });

  it('resets after 10 s of continuous SYNCHRONIZED; that loss does not count', () => {
    const b = new RecoveryBackoff();
    for (let i = 0; i < 5; i++) b.onRecoveryFailed();
    b.onSynchronized(0);
    b.onSyncLost(BACKOFF_STABLE_MS);
    expect(b.failures).to.equal(0);
    expect(b.nextDelayMs(() => 0.5)).to.equal(0);
    b.onRecoveryFailed();
    expect(b.nextDelayMs(() => 0)).to.equal(50);
  });
});
