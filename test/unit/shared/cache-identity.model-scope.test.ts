// cache-identity §2, the directory's Query half: a request's `model` and `cache_salt` resolved
// against the instances' served-model lists (shared/view/model-scope.ts) into the key identity and
// the instances in scope (directory-svc/grpc/query-identity.ts), and the refusals.
import { expect } from 'chai';
import { KeyIdentityCache, PLAIN_IDENTITY } from '../../../shared/keys/cache-identity.js';
import { modelNotFoundMessage, modelScope, type ListedInstance } from '../../../shared/view/model-scope.js';
import { MAX_CACHE_SALT_LENGTH, queryIdentity } from '../../../directory-svc/grpc/query-identity.js';

const FLEET: readonly ListedInstance[] = [
  { name: 'llama-0', models: [{ name: 'llama', parent: null }, { name: 'sql-lora', parent: 'llama' }] },
  { name: 'llama-1', models: [{ name: 'llama', parent: null }] },
  { name: 'qwen-0', models: [{ name: 'qwen', parent: null }] },
];
const UNKNOWN: ListedInstance = { name: 'xllm-0', models: null };

const admitted = (scope: { admits: (n: string) => boolean }, names: readonly string[]): string[] => names.filter((n) => scope.admits(n));
const ALL = ['llama-0', 'llama-1', 'qwen-0', 'xllm-0', 'static-0'];

describe('cache-identity §2 a query\'s model and cache_salt', () => {
  describe('modelScope', () => {
    it('CI5 a base model scopes the instances serving it, plus unknown lists and instances the lists do not know', () => {
      const s = modelScope('llama', [...FLEET, UNKNOWN]);
      expect(s).to.include({ model: 'llama', loraName: null, listed: true });
      expect(admitted(s, ALL)).to.deep.equal(['llama-0', 'llama-1', 'xllm-0', 'static-0']);
      expect(admitted(modelScope('qwen', FLEET), ALL)).to.deep.equal(['qwen-0', 'xllm-0', 'static-0']);
    });

    it('CI1 an adapter (listed with a parent by some instance) is the LoRA name of the keys; only its instances are in scope', () => {
      const s = modelScope('sql-lora', FLEET);
      expect(s).to.include({ loraName: 'sql-lora', listed: true });
      expect(admitted(s, ['llama-0', 'llama-1', 'qwen-0'])).to.deep.equal(['llama-0']);
      // Listed as a base by one instance and as an adapter by another: still an adapter (§2).
      const mixed = modelScope('m', [{ name: 'a', models: [{ name: 'm', parent: null }] }, { name: 'b', models: [{ name: 'x', parent: null }, { name: 'm', parent: 'x' }] }]);
      expect(mixed.loraName).to.equal('m');
    });

    it('CI5 a model no known list names is not listed; an unknown list makes every model listed', () => {
      expect(modelScope('mistral', FLEET).listed).to.equal(false);
      expect(modelScope('mistral', [...FLEET, UNKNOWN]).listed).to.equal(true);
      expect(modelScope('mistral', []).listed).to.equal(false);
      expect(modelNotFoundMessage('mistral')).to.equal('The model `mistral` does not exist.');
    });
  });

  describe('queryIdentity (the gRPC Query fields)', () => {
    const ids = new KeyIdentityCache();

    it('CI2 empty strings are absent: every instance, plain keys; a salt alone salts block 0 only', () => {
      const plain = queryIdentity('', '', FLEET, ids);
      expect(plain.ok && plain.scope.admits === null && plain.scope.identity === PLAIN_IDENTITY && plain.model === null).to.equal(true);
      const salted = queryIdentity(undefined, 'tenant-a', FLEET, ids);
      if (!salted.ok) throw new Error('refused');
      expect(salted.scope.identity).to.include({ loraName: null, salt: 'tenant-a' });
      expect(salted.scope.identity.chainSuffix).to.equal(null);
      expect(salted.scope.admits).to.equal(null);
    });

    it('CI1 CI2 an adapter with a salt: LoRA on every block, salt on block 0, scoped to the adapter\'s instances', () => {
      const r = queryIdentity('sql-lora', 'tenant-a', FLEET, ids);
      if (!r.ok) throw new Error('refused');
      expect(r.scope.identity).to.include({ loraName: 'sql-lora', salt: 'tenant-a' });
      expect(admitted({ admits: r.scope.admits! }, ['llama-0', 'llama-1', 'qwen-0'])).to.deep.equal(['llama-0']);
      expect(r.model).to.include({ model: 'sql-lora', listed: true });
      // The same identity twice is the same object (no allocation per query).
      const again = queryIdentity('sql-lora', 'tenant-a', FLEET, ids);
      expect(again.ok && again.scope.identity).to.equal(r.scope.identity);
    });

    it('CI5 a base model keeps base keys', () => {
      const r = queryIdentity('llama', '', FLEET, ids);
      expect(r.ok && r.scope.identity).to.equal(PLAIN_IDENTITY);
    });

    it('bad values are refused naming the field', () => {
      expect(queryIdentity('llama\u0000', '', FLEET, ids)).to.deep.equal({ ok: false, field: 'model', reason: 'expected no control characters, got "llama\\u0000"' });
      expect(queryIdentity('m'.repeat(1025), '', FLEET, ids)).to.deep.equal({ ok: false, field: 'model', reason: 'expected at most 1024 characters, got 1025' });
      expect(queryIdentity('', 's'.repeat(MAX_CACHE_SALT_LENGTH + 1), FLEET, ids)).to.deep.equal({ ok: false, field: 'cache_salt', reason: `expected at most ${MAX_CACHE_SALT_LENGTH} characters, got ${MAX_CACHE_SALT_LENGTH + 1}` });
      expect(queryIdentity(3, '', FLEET, ids)).to.deep.equal({ ok: false, field: 'model', reason: 'expected a string' });
      expect(queryIdentity('', 3, FLEET, ids)).to.deep.equal({ ok: false, field: 'cache_salt', reason: 'expected a string' });
    });
  });
});
