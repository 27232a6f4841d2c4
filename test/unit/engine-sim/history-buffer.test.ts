// The simulator's vLLM/SGLang history ring (tools/engine-sim/history-buffer.ts): the reply a
// real publisher sends for ["", start_seq] (engines.md §3), both layouts, and rotation.
import { expect } from 'chai';
import { HistoryBuffer } from '../../../tools/engine-sim/history-buffer.js';
import { readU64be } from '../../../tools/engine-sim/wire-encoding.js';

const topic = new TextEncoder().encode('kv');
const seqs = (reply: Uint8Array[][], seqAt: number): bigint[] => reply.slice(0, -1).map((m) => readU64be(m[seqAt]) as bigint);

describe('engine simulator history replay ring (engines.md §3, §5)', () => {
  it('layout 2 replies ["", seq, payload] for every buffered seq >= start_seq, then ["", ff×8, ""]', () => {
    const h = new HistoryBuffer(10);
    for (let s = 0n; s < 4n; s++) h.push(s, new Uint8Array([Number(s)]));
    const reply = h.reply(2n, 2, topic);
    expect(seqs(reply, 1)).to.deep.equal([2n, 3n]);
    expect(reply[0]!.map((f) => f.length)).to.deep.equal([0, 8, 1]);
    expect(reply.at(-1)!.map((f) => Buffer.from(f).toString('hex'))).to.deep.equal(['', 'ffffffffffffffff', '']);
  });

  it('layout 3 carries the topic frame; its terminator has an empty topic frame', () => {
    const h = new HistoryBuffer(10);
    h.push(0n, new Uint8Array([7]));
    const reply = h.reply(0n, 3, topic);
    expect(Buffer.from(reply[0]![1]!).toString()).to.equal('kv');
    expect(seqs(reply, 2)).to.deep.equal([0n]);
    expect(reply.at(-1)!.map((f) => Buffer.from(f).toString('hex'))).to.deep.equal(['', '', 'ffffffffffffffff', '']);
  });

  it('keeps only the last N batches: an older start_seq silently starts later; nothing buffered = terminator only', () => {
    const h = new HistoryBuffer(3);
    for (let s = 0n; s < 7n; s++) h.push(s, new Uint8Array(0));
    expect(h.oldestSeq).to.equal(4n);
    expect(seqs(h.reply(0n, 2, topic), 1)).to.deep.equal([4n, 5n, 6n]);
    expect(h.reply(7n, 2, topic)).to.have.length(1);
    h.clear();
    expect(h.length).to.equal(0);
    expect(h.reply(0n, 2, topic)).to.have.length(1);
  });
});
