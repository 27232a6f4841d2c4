// kvcm-meta §1.2 end to end under a seeded mutation fuzzer: mutated request bodies of every RPC in
// test/fuzz/corpus/meta-request (token-level and structural JSON mutations, invalid UTF-8, empty
// and oversized bodies) POSTed over real HTTP to the real MetaService (SQLite in a temp dir).
// Every answer must be 200 (a response message with a status code), 400 `{}` or 413 `{}`; the
// server keeps answering /health throughout; RSS growth over the run stays bounded. A request
// unanswered within the guard is reported as a hang (with its input), not timed on success.
// FUZZ_SEED reproduces a run, FUZZ_ITERATIONS lengthens it.
import { expect } from 'chai';
import { DEFAULT_META_CONFIG_JSON } from '../../meta-svc/config/default-meta-config.js';
import { MIB, describeGrowth, exposedGc } from './lib/memory.js';
import { Rng } from './lib/rng.js';
import { fuzzIterations, fuzzSeed } from './lib/knobs.js';
import { loadCorpus } from './lib/corpus.js';
import { mutateBytes } from './lib/byte-mutations.js';
import { mutateJsonText } from './lib/json-mutations.js';
import { runFuzzLoad } from './lib/http-load.js';
import { MetaHarness } from '../helpers/meta-service-harness.js';

const SEED = fuzzSeed();
const MAX_BODY_BYTES = 256 * 1024;
/** A request not answered within this long is a hang (generous: a loaded 2-core machine). */
const HANG_MS = 15_000;
const PARALLEL = 4;

interface Case {
  readonly rpc: string;
  readonly body: Uint8Array;
}

const corpus = loadCorpus('meta-request').map((c) => ({ rpc: c.name.replace(/\.json$/, ''), text: new TextDecoder().decode(c.bytes) }));
const texts = corpus.map((c) => c.text);

/** Input i of the run: a pure function of (seed, i). */
function caseFor(i: number): Case {
  const rng = Rng.forIteration(SEED, i);
  const seed = rng.pick(corpus);
  // Mostly the RPC's own body, sometimes another RPC's body sent to it.
  const rpc = rng.chance(0.85) ? seed.rpc : rng.pick(corpus).rpc;
  const roll = rng.int(100);
  if (roll < 2) return { rpc, body: new Uint8Array(0) };
  if (roll < 4) return { rpc, body: new Uint8Array(MAX_BODY_BYTES + 1 + rng.int(1024)).fill(0x20) };
  let body: Uint8Array = new TextEncoder().encode(rng.chance(0.9) ? mutateJsonText(rng, seed.text, texts) : seed.text);
  if (roll < 12) body = mutateBytes(rng, body); // often invalid UTF-8 or broken JSON bytes
  return { rpc, body };
}

function show(c: Case): string {
  const text = Buffer.from(c.body).toString('utf8');
  return `POST /api/${c.rpc} ${JSON.stringify(text.length > 2000 ? `${text.slice(0, 2000)}… (${c.body.length} bytes)` : text)}`;
}

describe(`kvcm-meta §1.2 HTTP edge under a seeded mutation fuzzer (FUZZ_SEED=${SEED})`, function () {
  this.timeout(180_000);
  let h: MetaHarness | null = null;

  afterEach(async () => {
    await h?.close();
    h?.removeDir();
    h = null;
  });

  it('answers only 200, 400 {} or 413 {}, keeps serving /health, and RSS growth stays bounded', async () => {
    const config = JSON.parse(DEFAULT_META_CONFIG_JSON) as Record<string, unknown>;
    config['http'] = { max_body_bytes: MAX_BODY_BYTES };
    h = await MetaHarness.start({ configText: JSON.stringify(config) });
    const harness = h;
    const iterations = fuzzIterations(300);
    const statuses: Record<string, number> = {};
    const codes: Record<string, number> = {};

    const send = async (i: number): Promise<void> => {
      const c = caseFor(i);
      let status: number;
      let text: string;
      try {
        const res = await fetch(`${harness.url}/api/${c.rpc}`, { method: 'POST', body: Buffer.from(c.body), signal: AbortSignal.timeout(HANG_MS) });
        status = res.status;
        text = await res.text();
      } catch (e) {
        throw new Error(`FUZZ_SEED=${SEED} iteration ${i}: no answer (${e instanceof Error ? e.message : String(e)})\n${show(c)}`);
      }
      const where = `FUZZ_SEED=${SEED} iteration ${i}: HTTP ${status} ${text.slice(0, 300)}\n${show(c)}`;
      expect([200, 400, 413], where).to.include(status);
      if (status !== 200) expect(text, where).to.equal('{}');
      else {
        const body = JSON.parse(text) as { header?: { status?: { code?: unknown } } };
        const code = body.header?.status?.code;
        expect(code, where).to.be.a('string');
        // §1.2: INTERNAL_ERROR means a handler threw; a malformed request must be refused, not crash one.
        expect(code, `${where}\n(a handler threw on this input)`).to.not.equal('INTERNAL_ERROR');
        codes[String(code)] = (codes[String(code)] ?? 0) + 1;
      }
      statuses[status] = (statuses[status] ?? 0) + 1;
    };

    const health = async (): Promise<void> => {
      const r = await harness.request('GET', '/health');
      expect([r.status, r.body], 'health during the fuzz run').to.deep.equal([200, { status: 'ok' }]);
    };

    const growth = await runFuzzLoad(iterations, PARALLEL, send, health);
    console.log(`      statuses ${JSON.stringify(statuses)}, codes ${JSON.stringify(codes)}; ${describeGrowth(growth)}`);
    // RSS includes allocator slack and SQLite's cache, so its bound is wider than the heap's.
    expect(growth.rssBytes, 'RSS growth over the run').to.be.lessThan(256 * MIB);
    if (exposedGc() !== null) expect(growth.heapBytes, 'heap growth after gc').to.be.lessThan(64 * MIB);
    expect(statuses[200] ?? 0, 'parsed requests').to.be.greaterThan(0);
    expect(statuses[400] ?? 0, 'rejected requests').to.be.greaterThan(0);
  });
});
