/**
 * TT11 (docs/benchmarks.md "Trace replay and the mixed-length workload"): the cluster benchmark's Mooncake trace replay — the format
 * as published (FAST25-release/traces: JSON Lines of timestamp, input_length, output_length,
 * hash_ids, one id per 512-token block) checked strictly with line numbers, the tokens each hash
 * id stands for, and the generated mixed-length workload in the same format.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MOONCAKE_BLOCK_TOKENS, parseMooncakeTrace, readMooncakeTrace, toJsonl, traceStats, traceTokenIds, TraceFormatError, TRACE_LIMITS } from '../../../bench/cluster/mooncake-trace.js';
import { CONVERSATION_INPUT, generateMixedTrace, MAX_INPUT, MIN_INPUT } from '../../../bench/cluster/mixed-trace.js';
import { traceStarts, traceWorkload } from '../../../bench/cluster/trace-workload.js';

/** Lines written as Mooncake's files write them (spaces after the separators). */
const SAMPLE = [
  '{"timestamp": 0, "input_length": 1200, "output_length": 52, "hash_ids": [0, 1, 2]}',
  '{"timestamp": 0, "input_length": 700, "output_length": 26, "hash_ids": [0, 3]}',
  '{"timestamp": 3000, "input_length": 1800, "output_length": 300, "hash_ids": [0, 1, 2, 4]}',
].join('\n');

function formatError(fn: () => unknown): TraceFormatError {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(TraceFormatError);
    return e as TraceFormatError;
  }
  throw new Error('expected a TraceFormatError');
}

describe('TT11 Mooncake trace replay (bench/cluster)', () => {
  it('TT11 parses the published format: fields, line numbers, blank lines, CRLF and a BOM; unknown fields are ignored', () => {
    const text = '\uFEFF' + SAMPLE.replace('\n', '\r\n') + '\n\n{"timestamp": 3001, "input_length": 10, "output_length": 0, "hash_ids": [9], "session_id": "x"}\n';
    const r = parseMooncakeTrace(text, 'sample.jsonl');
    expect(r.map((x) => [x.line, x.timestampMs, x.inputLength, x.outputLength, x.hashIds])).to.deep.equal([
      [1, 0, 1200, 52, [0, 1, 2]],
      [2, 0, 700, 26, [0, 3]],
      [3, 3000, 1800, 300, [0, 1, 2, 4]],
      [5, 3001, 10, 0, [9]],
    ]);
  });

  it('TT11 every bad line names the file, its line, the field and what was expected', () => {
    const bad = (line: string): string => formatError(() => parseMooncakeTrace(`${SAMPLE}\n${line}`, 't.jsonl')).message;
    expect(bad('{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [0]')).to.match(/^trace_format: t\.jsonl:4: not JSON /);
    expect(bad('[1, 2]')).to.equal('trace_format: t.jsonl:4: expected a JSON object, got an array of 2');
    expect(bad('{"input_length": 1, "output_length": 1, "hash_ids": []}')).to.equal('trace_format: t.jsonl:4: timestamp: expected ms ≥ 0 (a number), got nothing');
    expect(bad('{"timestamp": "0", "input_length": 1, "output_length": 1, "hash_ids": []}')).to.match(/:4: timestamp: .*got "0"$/);
    expect(bad('{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": []}')).to.match(/:4: timestamp: /);
    expect(bad('{"timestamp": 1, "input_length": 0, "output_length": 1, "hash_ids": []}')).to.equal(`trace_format: t.jsonl:4: input_length: expected an integer in [1, ${TRACE_LIMITS.inputTokens}], got 0`);
    expect(bad('{"timestamp": 1, "input_length": 1.5, "output_length": 1, "hash_ids": []}')).to.match(/:4: input_length: /);
    expect(bad(`{"timestamp": 1, "input_length": ${TRACE_LIMITS.inputTokens + 1}, "output_length": 1, "hash_ids": []}`)).to.match(/:4: input_length: /);
    expect(bad('{"timestamp": 1, "input_length": 1, "output_length": -1, "hash_ids": []}')).to.match(/:4: output_length: /);
    expect(bad('{"timestamp": 1, "input_length": 1, "output_length": 1}')).to.match(/:4: hash_ids: expected an array of at most \d+ ids, got nothing$/);
    expect(bad('{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [0, "1"]}')).to.equal('trace_format: t.jsonl:4: hash_ids[1]: expected an integer ≥ 0, got "1"');
    expect(bad('{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [-2]}')).to.match(/:4: hash_ids\[0\]: /);
    expect(formatError(() => parseMooncakeTrace('\n \n', 'empty.jsonl')).message).to.equal('trace_format: empty.jsonl:0: no request in the trace (expected one JSON object per line)');
    expect(formatError(() => readMooncakeTrace('/nonexistent/trace.jsonl')).message).to.match(/^trace_format: \/nonexistent\/trace\.jsonl:0: cannot read it/);
  });

  it('TT11 lines out of time order are sorted (stably); maxRequests keeps the earliest; a file reads the same', () => {
    const text = ['{"timestamp": 5, "input_length": 1, "output_length": 0, "hash_ids": [1]}', '{"timestamp": 2, "input_length": 1, "output_length": 0, "hash_ids": [2]}', '{"timestamp": 2, "input_length": 1, "output_length": 0, "hash_ids": [3]}'].join('\n');
    expect(parseMooncakeTrace(text, 'x').map((r) => r.line)).to.deep.equal([2, 3, 1]);
    expect(parseMooncakeTrace(text, 'x', { maxRequests: 2 }).map((r) => r.line)).to.deep.equal([2, 3]);
    const dir = mkdtempSync(join(tmpdir(), 'trace-'));
    try {
      writeFileSync(join(dir, 't.jsonl'), text);
      expect(readMooncakeTrace(join(dir, 't.jsonl'))).to.deep.equal(parseMooncakeTrace(text, join(dir, 't.jsonl')));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('TT11 each hash id stands for the same 512 tokens wherever it appears; prompts are cut at input_length', () => {
    const [a, b, c] = parseMooncakeTrace(SAMPLE, 's');
    const ta = traceTokenIds(a!, 7, 0);
    const tb = traceTokenIds(b!, 7, 1);
    const tc = traceTokenIds(c!, 7, 2);
    expect([ta.length, tb.length, tc.length]).to.deep.equal([1200, 700, 1800]);
    // Shared ids [0, 1, 2]: a (1,200 tokens) is a prefix of c; b shares only id 0's block.
    expect(tc.slice(0, 1200)).to.deep.equal(ta);
    expect(tb.slice(0, MOONCAKE_BLOCK_TOKENS)).to.deep.equal(ta.slice(0, MOONCAKE_BLOCK_TOKENS));
    expect(tb[MOONCAKE_BLOCK_TOKENS]).to.not.equal(ta[MOONCAKE_BLOCK_TOKENS]);
    // Another seed, other tokens; ids are token ids a tokenizer could give: [1, 100000].
    expect(traceTokenIds(a!, 8, 0)).to.not.deep.equal(ta);
    expect(Math.min(...tc)).to.be.at.least(1);
    expect(Math.max(...tc)).to.be.at.most(100_000);
  });

  it('TT11 a prompt longer than its ids cover gets tokens of its own; statistics count such lines and the reused blocks', () => {
    const r = parseMooncakeTrace(SAMPLE + '\n{"timestamp": 4000, "input_length": 2000, "output_length": 1, "hash_ids": [0, 1]}', 's');
    const t = traceTokenIds(r[3]!, 7, 3);
    expect(t.slice(0, 1024)).to.deep.equal(traceTokenIds(r[0]!, 7, 0).slice(0, 1024));
    expect(t.slice(1024)).to.not.deep.equal(traceTokenIds(r[2]!, 7, 2).slice(1024, 2000));
    const stats = traceStats(r);
    expect(stats).to.deep.include({ requests: 4, spanMs: 4000, idsMismatched: 1, meanOutputTokens: 95 });
    expect(stats.inputTokens).to.deep.equal({ mean: 1425, p50: 1200, p90: 2000, p99: 2000, max: 2000 });
    // Blocks 3 + 2 + 4 + 4 = 13; reused: b's block 0, c's 0 1 2, the last one's 0 1 = 6.
    expect(stats.prefixReuse).to.equal(6 / 13);
  });

  it("TT11 the mixed-length workload follows the conversation trace's lengths and is in the format (seeded)", () => {
    const records = generateMixedTrace(1, { requests: 2000, ratePerS: 3.3, continueShare: 0.5, minTurnGapMs: 30_000 });
    expect(generateMixedTrace(1, { requests: 50, ratePerS: 3.3, continueShare: 0.5, minTurnGapMs: 30_000 })).to.deep.equal(records.slice(0, 50));
    // Written and read back as Mooncake JSON Lines: the same requests.
    const back = parseMooncakeTrace(toJsonl(records), 'mixed');
    expect(back.map((r) => [r.timestampMs, r.inputLength, r.outputLength, r.hashIds])).to.deep.equal(records.map((r) => [r.timestampMs, r.inputLength, r.outputLength, r.hashIds]));
    const s = traceStats(records);
    expect(s.idsMismatched).to.equal(0);
    expect(s.inputTokens.p50).to.be.within(Math.exp(CONVERSATION_INPUT.logMean) * 0.85, Math.exp(CONVERSATION_INPUT.logMean) * 1.15);
    expect(s.inputTokens.mean).to.be.within(9000, 14000);
    expect(Math.min(...records.map((r) => r.inputLength))).to.be.at.least(MIN_INPUT);
    expect(s.inputTokens.max).to.be.at.most(MAX_INPUT);
    expect(s.prefixReuse).to.be.within(0.3, 0.55);
    expect(records.every((r) => r.hashIds[0] === 0)).to.equal(true);
    expect(s.spanMs / 1000).to.be.closeTo(2000 / 3.3, 60);
  });

  it('TT11 a trace as a workload: one completion per request, replayed at its times scaled to the rate', () => {
    const w = traceWorkload('trace', parseMooncakeTrace(SAMPLE, 's'), 16, 3);
    expect(w.requests).to.equal(3);
    expect(w.sessions.map((s) => s.length)).to.deep.equal([1, 1, 1]);
    expect(JSON.parse(w.sessions[0]![0]!.body)).to.deep.equal({ prompt: w.sessions[0]![0]!.tokenIds, max_tokens: 1 });
    expect(w.arrivalsMs).to.deep.equal([0, 0, 3000]);
    // 2 gaps in 3 s: 2/3 requests per second recorded; replayed at 2 per second: three times as fast.
    expect(w.nativeRatePerS).to.be.closeTo(2 / 3, 1e-12);
    expect(traceStarts(w.arrivalsMs, w.nativeRatePerS, 2)).to.deep.equal([0, 0, 1000]);
    expect(() => traceStarts(w.arrivalsMs, w.nativeRatePerS, 0)).to.throw(RangeError);
  });
});
