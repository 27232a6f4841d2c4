// kv-events §7.1 sequence rules and the §7 transition table, without sockets.
import { expect } from 'chai';
import { classifySeq, gapError, seqResetError } from '../../../directory-svc/recovery/sequence-rules.js';
import { IllegalTransitionError, STREAM_STATES, isAllowedTransition } from '../../../directory-svc/subscription/stream-state.js';

describe('kv-events §7.1 sequence rules', () => {
  it('last + 1 applies, > last + 1 is a gap, ≤ last is a reset', () => {
    expect(classifySeq(-1n, 0n)).to.equal('next');
    expect(classifySeq(4n, 5n)).to.equal('next');
    expect(classifySeq(4n, 7n)).to.equal('gap');
    expect(classifySeq(-1n, 3n)).to.equal('gap');
    expect(classifySeq(4n, 4n)).to.equal('reset');
    expect(classifySeq(4n, 0n)).to.equal('reset');
  });

  it('exact u64 seqs above 2^53 keep their order', () => {
    const big = 2n ** 63n + 5n;
    expect(classifySeq(big, big + 1n)).to.equal('next');
    expect(classifySeq(big, big + 2n)).to.equal('gap');
  });

  it('errors carry the §7.1 wording and stable classes', () => {
    const g = gapError(5n, 8n);
    expect(g.class).to.equal('gap');
    expect(g.detail).to.equal('expected 5, got 8');
    const r = seqResetError(0n, 9n);
    expect(r.class).to.equal('seq_reset');
    expect(r.detail).to.equal('got 0 after 9');
  });
});

describe('kv-events §7 state table', () => {
  it('allows exactly the §7 moves', () => {
    const allowed = new Set([
      'CONNECTING>RECOVERING',
      'RECOVERING>SYNCHRONIZED',
      'RECOVERING>UNSYNCHRONIZED',
      'RECOVERING>CONNECTING',
      'SYNCHRONIZED>RECOVERING',
      'SYNCHRONIZED>UNSYNCHRONIZED',
      'SYNCHRONIZED>CONNECTING',
      'UNSYNCHRONIZED>RECOVERING',
      'UNSYNCHRONIZED>SYNCHRONIZED',
      'UNSYNCHRONIZED>CONNECTING',
    ]);
    for (const a of STREAM_STATES) {
      for (const b of STREAM_STATES) expect(isAllowedTransition(a, b), `${a}>${b}`).to.equal(allowed.has(`${a}>${b}`));
    }
  });

  it('an illegal move names the allowed ones', () => {
    const e = new IllegalTransitionError('CONNECTING', 'SYNCHRONIZED');
    expect(e.class).to.equal('illegal_transition');
    expect(e.message).to.contain('RECOVERING');
  });
});
