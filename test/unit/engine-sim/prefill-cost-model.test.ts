// Simulated engine prefill cost model (tools/engine-sim/prefill-cost-model.ts): the cost formula,
// the FIFO queue on its virtual schedule (a fixed clock, so every TTFT is exact), and the
// OpenAiEndpoint hook (off by default; on, the answer carries the engine's TTFT headers).
import { expect } from 'chai';
import { OpenAiEndpoint, OpenAiServer, type PromptAdmitter } from '../../../tools/engine-sim/openai-server.js';
import { PREFILL_TIMING_HEADERS, PrefillQueue, prefillCostUs, type PrefillCostOptions } from '../../../tools/engine-sim/prefill-cost-model.js';

const COST: PrefillCostOptions = { baseUs: 1000, usPerToken: 10, hostUsPerToken: 2, concurrency: 1 };
const hits = (hitBlocks: number, hostHitBlocks: number) => async () => ({ hitBlocks, hostHitBlocks });

describe('engine-sim prefill cost model', () => {
  it('costs base + per recomputed token + less per Host-hit token; hits beyond the prompt are clamped', () => {
    expect(prefillCostUs(COST, 100, 0, 0)).to.equal(2000);
    expect(prefillCostUs(COST, 100, 60, 0)).to.equal(1400);
    expect(prefillCostUs(COST, 100, 60, 40)).to.equal(1080);
    expect(prefillCostUs(COST, 100, 200, 50)).to.equal(1000);
  });

  it('serves FIFO one at a time: TTFT = queue wait + own prefill, each priced by the hits at its admission', async () => {
    const q = new PrefillQueue(COST, () => 0); // every request arrives at virtual 0
    const admitted: string[] = [];
    const admit = (name: string, device: number, host: number) => async () => {
      admitted.push(name);
      return { hitBlocks: device, hostHitBlocks: host };
    };
    const runs = [q.run(100, 10, admit('a', 0, 0)), q.run(100, 10, admit('b', 6, 0)), q.run(100, 10, admit('c', 6, 4))];
    expect(q.pending).to.equal(3);
    const [a, b, c] = await Promise.all(runs);
    expect(admitted).to.deep.equal(['a', 'b', 'c']);
    expect([a!.queueMs, a!.prefillMs, a!.ttftMs]).to.deep.equal([0, 2, 2]);
    expect([b!.queueMs, b!.prefillMs, b!.ttftMs]).to.deep.equal([2, 1.4, 3.4]);
    expect([c!.queueMs, c!.ttftMs]).to.deep.equal([3.4, 3.4 + 1.08]);
    expect([c!.deviceHitTokens, c!.hostHitTokens]).to.deep.equal([60, 40]);
    expect(q.pending).to.equal(0);
    expect({ served: q.served, prompt: q.promptTokens, device: q.deviceHitTokens, host: q.hostHitTokens, recomputed: q.recomputedTokens }).to.deep.equal({
      served: 3,
      prompt: 300,
      device: 120,
      host: 40,
      recomputed: 140,
    });
  });

  it('with concurrency 2 the third request starts when the first slot frees', async () => {
    const q = new PrefillQueue({ ...COST, concurrency: 2 }, () => 0);
    const [a, b, c] = await Promise.all([q.run(100, 10, hits(0, 0)), q.run(300, 10, hits(0, 0)), q.run(100, 10, hits(0, 0))]);
    expect([a!.ttftMs, b!.ttftMs]).to.deep.equal([2, 4]);
    expect([c!.queueMs, c!.ttftMs]).to.deep.equal([2, 4]);
  });

  it('a failed admission frees its slot for the next request', async () => {
    const q = new PrefillQueue(COST, () => 0);
    const failed = q.run(10, 10, async () => {
      throw new Error('engine error');
    });
    const next = q.run(100, 10, hits(0, 0));
    const err = await failed.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(Error).with.property('message', 'engine error');
    expect((await next).ttftMs).to.equal(2);
  });

  it('refuses a concurrency below 1 and negative costs', () => {
    expect(() => new PrefillQueue({ ...COST, concurrency: 0 })).to.throw(RangeError);
    expect(() => new PrefillQueue({ ...COST, usPerToken: -1 })).to.throw(RangeError);
  });

  describe('OpenAiEndpoint hook', () => {
    let server: OpenAiServer | null = null;
    afterEach(async () => {
      await server?.close();
      server = null;
    });

    const engine: PromptAdmitter = { blockSize: 4, admitPrompt: async () => ({ hitBlocks: 1, hostHitBlocks: 1 }) };

    async function complete(prefill: PrefillQueue | null): Promise<Response> {
      server = await OpenAiServer.listen({ port: 0, endpoint: new OpenAiEndpoint({ engine, tokenIntervalMs: 0, prefill }) });
      return fetch(`http://127.0.0.1:${server.port}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], max_tokens: 1 }) });
    }

    it('off by default: no timing headers, cached tokens as before', async () => {
      const res = await complete(null);
      expect(res.headers.get(PREFILL_TIMING_HEADERS.ttftMs)).to.equal(null);
      const body = (await res.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } };
      expect(body.usage.prompt_tokens_details.cached_tokens).to.equal(8);
    });

    it('on: the answer carries the engine TTFT and the Device/Host split of the cached tokens', async () => {
      const res = await complete(new PrefillQueue(COST, () => 0));
      expect(res.status).to.equal(200);
      // 10 tokens: 4 Device hits, 4 Host hits, 2 recomputed → 1000 + 2·10 + 4·2 µs.
      expect(res.headers.get(PREFILL_TIMING_HEADERS.ttftMs)).to.equal('1.028');
      expect(res.headers.get(PREFILL_TIMING_HEADERS.queueMs)).to.equal('0.000');
      expect(res.headers.get(PREFILL_TIMING_HEADERS.deviceHitTokens)).to.equal('4');
      expect(res.headers.get(PREFILL_TIMING_HEADERS.hostHitTokens)).to.equal('4');
      const body = (await res.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } };
      expect(body.usage.prompt_tokens_details.cached_tokens).to.equal(8);
    });
  });
});
