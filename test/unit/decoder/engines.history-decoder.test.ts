// engines.md §3 history reply messages (directory-svc/decoder/history-decoder.ts): both layouts
// and their terminators, and the parse / protocol / limit classes of malformed ones. Pure.
import { expect } from 'chai';
import { encode } from '@msgpack/msgpack';
import { decodeHistoryMessage } from '../../../directory-svc/decoder/history-decoder.js';
import type { HistoryDecoderOptions } from '../../../directory-svc/decoder/history-decoder.js';
import { isStreamError } from '../../../directory-svc/errors/stream-errors.js';

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const seq = (v: bigint): Uint8Array => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, v, false);
  return b;
};
const E = new Uint8Array(0);
const END = seq(0xffffffffffffffffn);
const OPTS: HistoryDecoderOptions = { topic: utf8('kv'), dpRank: 0, maxMessageBytes: 65536, historyKindRules: true };
const batch = encode([1700000000.5, [{ type: 'AllBlocksCleared' }]]);

function classOf(frames: Uint8Array[]): string {
  try {
    decodeHistoryMessage(frames, OPTS);
    return 'ok';
  } catch (e) {
    if (isStreamError(e)) return e.class;
    throw e;
  }
}

describe('engines.md §3 history reply messages', () => {
  it('E10 layout 2 ["", seq, payload] and its terminator ["", ff×8, ""]', () => {
    const m = decodeHistoryMessage([E, seq(7n), batch], OPTS);
    expect(m.kind === 'batch' && m.batch.seq).to.equal(7n);
    expect(decodeHistoryMessage([E, END, E], OPTS).kind).to.equal('terminator');
  });

  it('E10 layout 3 ["", topic, seq, payload] and its terminator ["", "", ff×8, ""] (empty topic not compared)', () => {
    const m = decodeHistoryMessage([E, utf8('kv'), seq(3n), batch], OPTS);
    expect(m.kind === 'batch' && m.batch.seq).to.equal(3n);
    expect(decodeHistoryMessage([E, E, END, E], OPTS).kind).to.equal('terminator');
  });

  it('malformed messages are parse; a differing topic is protocol; an oversized payload is limit', () => {
    expect(classOf([E, seq(1n)])).to.equal('parse');
    expect(classOf([utf8('x'), seq(1n), batch])).to.equal('parse');
    expect(classOf([E, new Uint8Array(7), batch])).to.equal('parse');
    expect(classOf([E, END, utf8('x')])).to.equal('parse');
    expect(classOf([E, seq(1n), Uint8Array.from([0xc1])])).to.equal('parse');
    expect(classOf([E, utf8('other'), seq(1n), batch])).to.equal('protocol');
    expect(classOf([E, seq(1n), new Uint8Array(65537)])).to.equal('limit');
  });
});
