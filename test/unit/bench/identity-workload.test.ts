/**
 * The mixed-identity cluster benchmark's pure parts (bench/cluster/identity-workload.ts,
 * oracle-identity.ts): the workload's bodies say each identity as a client would, salted tenants
 * share their system prompts' tokens, and the ORACLE reads an engine's pool exactly under the keys
 * that engine admits a request with (a real BlockPool, the Qwen3 and Llama 3.1 tokenizers).
 */
import { expect } from 'chai';
import { bundledLlama31TokenizerDir, bundledQwen3TokenizerDir } from '../../../shared/tokenize/bundled-tokenizer.js';
import { PromptTokenizer } from '../../../shared/tokenize/prompt-tokenizer.js';
import { BlockPool } from '../../../tools/engine-sim/block-pool.js';
import { ServedModelRegistry } from '../../../tools/engine-sim/served-model-registry.js';
import { FLEET, IDENTITIES, LLAMA, LORA, QWEN, buildIdentityWorkload, type IdentityShape, type IdentityWorkload } from '../../../bench/cluster/identity-workload.js';
import { admissionOn, PLAIN_IDENTITY } from '../../../bench/cluster/oracle-identity.js';

const BLOCK = 16;
const SHAPE: IdentityShape = { usersPerIdentity: 2, turns: 2, systemPrompts: 2, systemPromptTokens: 96, messageTokens: [8, 16], thinkMs: 50, rampMs: 100 };

/** Length of the common prefix of two id lists. */
function sharedPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe('cluster benchmark: mixed-identity workload and ORACLE identity rule', () => {
  let qwen: PromptTokenizer;
  let llama: PromptTokenizer;
  let w: IdentityWorkload;

  before(async () => {
    qwen = PromptTokenizer.load(bundledQwen3TokenizerDir(), '');
    llama = PromptTokenizer.load(bundledLlama31TokenizerDir(), '');
    w = await buildIdentityWorkload(7, BLOCK, SHAPE, (m) => (m === LLAMA ? llama : qwen));
  });

  after(async () => {
    await qwen.close();
    await llama.close();
  });

  it('the fleet splits 8 engines 5/3 between the base models, the adapter on some of the first', () => {
    const count = (m: string): number => FLEET.filter((g) => g.servedModels.includes(m)).reduce((n, g) => n + g.engines, 0);
    expect([count(QWEN), count(LLAMA), count(LORA)]).to.deep.equal([5, 3, 2]);
    for (const g of FLEET) expect(g.servedModels.includes(QWEN) && g.servedModels.includes(LLAMA), 'an engine serves one base model').to.equal(false);
  });

  it('every body names its model, salted tenants send cache_salt, and the adapter goes over completions', () => {
    expect(w.sessions.length).to.equal(SHAPE.usersPerIdentity * IDENTITIES.length);
    expect(w.requests).to.equal(w.sessions.length * SHAPE.turns);
    w.sessions.forEach((session, si) => {
      const identity = IDENTITIES[w.identityOf[si]!]!;
      for (const r of session) {
        const body = JSON.parse(r.body) as Record<string, unknown>;
        expect(body['model'], identity.label).to.equal(identity.model);
        expect(body['cache_salt'] ?? null, identity.label).to.equal(identity.cacheSalt);
        expect(r.path).to.equal(identity.path);
        expect(identity.path === '/v1/completions' ? typeof body['prompt'] : Array.isArray(body['messages'])).to.equal(identity.path === '/v1/completions' ? 'string' : true);
      }
    });
    expect(new Set(IDENTITIES.map((i) => i.cacheSalt)).size, 'two different salts and unsalted').to.equal(3);
  });

  it('is seeded: the same seed gives the same bodies and ids', async () => {
    const again = await buildIdentityWorkload(7, BLOCK, SHAPE, (m) => (m === LLAMA ? llama : qwen));
    expect(again.sessions.map((s) => s.map((r) => r.body))).to.deep.equal(w.sessions.map((s) => s.map((r) => r.body)));
    expect(again.sessions[3]![1]!.tokenIds).to.deep.equal(w.sessions[3]![1]!.tokenIds);
  });

  it('the Qwen3 identities of one user send the same system prompt tokens; the working set counts them once per identity', () => {
    const firstTurn = (label: string, user: number): readonly number[] => {
      const k = IDENTITIES.findIndex((i) => i.label === label);
      const si = w.identityOf.findIndex((x, i) => x === k && Math.floor(i / IDENTITIES.length) === user);
      return w.sessions[si]![0]!.tokenIds;
    };
    const a = firstTurn(`${QWEN}/tenant-a`, 0);
    const b = firstTurn(`${QWEN}/tenant-b`, 0);
    const plain = firstTurn(QWEN, 0);
    // Same chat template and system text: at least the system prompt's blocks are the same tokens.
    expect(sharedPrefix(a, b)).to.be.at.least(SHAPE.systemPromptTokens);
    expect(sharedPrefix(a, plain)).to.be.at.least(SHAPE.systemPromptTokens);
    const qwenBlocks = w.workingSetBlocks.get(QWEN)!;
    const oneIdentity = Math.floor(a.length / BLOCK);
    expect(qwenBlocks, 'four Qwen3 identities never share a block').to.be.at.least(4 * oneIdentity);
    expect(w.workingSetBlocks.get(LLAMA)).to.be.greaterThan(0);
  });

  it('admissionOn: no admission on an engine not serving the model; an adapter keys by its name, a salt passes through', () => {
    const qwenLora = new ServedModelRegistry({ names: [QWEN, LORA], strict: true });
    const llamaOnly = new ServedModelRegistry({ names: [LLAMA], strict: true });
    expect(admissionOn(llamaOnly, { model: QWEN, cacheSalt: null })).to.equal(null);
    expect(admissionOn(llamaOnly, { model: LORA, cacheSalt: null })).to.equal(null);
    expect(admissionOn(qwenLora, { model: LORA, cacheSalt: null })).to.deep.equal({ loraName: LORA, cacheSalt: null });
    expect(admissionOn(qwenLora, { model: QWEN, cacheSalt: 'tenant-a' })).to.deep.equal({ loraName: null, cacheSalt: 'tenant-a' });
    expect(admissionOn(qwenLora, PLAIN_IDENTITY)).to.deep.equal({ loraName: null, cacheSalt: null });
    // A lenient engine (no --served_models) serves any model as its base, as the simulator does.
    expect(admissionOn(new ServedModelRegistry({ names: ['sim'], strict: false }), { model: LLAMA, cacheSalt: null })).to.deep.equal({ loraName: null, cacheSalt: null });
  });

  it('the ORACLE reads a pool under the keys its engine admitted with, and finds nothing under another identity', () => {
    const models = new ServedModelRegistry({ names: [QWEN, LORA], strict: true });
    const tokens = w.sessions[0]![0]!.tokenIds;
    const blocks = Math.floor(tokens.length / BLOCK);
    const resident = (pool: BlockPool, identity: { model: string; cacheSalt: string | null }): number =>
      pool.hashesOf(tokens, admissionOn(models, identity)!).filter((h) => pool.tiersOf(h) !== 0).length;
    // What the engine admits with (openai-server.ts): the adapter's name and its vLLM id, the salt.
    const lora = models.adapter(LORA)!;
    const admitted: { model: string; cacheSalt: string | null; admit: { loraName: string | null; loraId: number | null; cacheSalt: string | null } }[] = [
      { model: LORA, cacheSalt: null, admit: { loraName: LORA, loraId: lora.id, cacheSalt: null } },
      { model: QWEN, cacheSalt: 'tenant-a', admit: { loraName: null, loraId: null, cacheSalt: 'tenant-a' } },
      { model: LORA, cacheSalt: 'tenant-b', admit: { loraName: LORA, loraId: lora.id, cacheSalt: 'tenant-b' } },
    ];
    const others = [
      { model: QWEN, cacheSalt: null },
      { model: LORA, cacheSalt: null },
      { model: QWEN, cacheSalt: 'tenant-a' },
      { model: QWEN, cacheSalt: 'tenant-b' },
      { model: LORA, cacheSalt: 'tenant-b' },
    ];
    for (const a of admitted) {
      const pool = new BlockPool({ blockSize: BLOCK, deviceCapacityBlocks: 4 * blocks, hostCapacityBlocks: 0 });
      pool.admitPrompt(tokens, a.admit);
      for (const o of others) {
        const same = o.model === a.model && o.cacheSalt === a.cacheSalt;
        expect(resident(pool, o), `stored as ${a.model}/${a.cacheSalt}, read as ${o.model}/${o.cacheSalt}`).to.equal(same ? blocks : 0);
      }
    }
  });
});
