// cache-identity §1 for etcd instances (xLLM's instance JSON `models`) and the view: a list is
// parsed per key (a bad one rejects that key only), carried by the instance table, and a change
// of it is published as an instance upsert in the view stream, like a load change is.
import { expect } from 'chai';
import { parseInstanceValue, type InstanceRegistration } from '../../../directory-svc/discovery/instance-json.js';
import { parseEnginesFile } from '../../../directory-svc/engines/engines-file.js';
import { ViewPublisher } from '../../../directory-svc/view/view-publisher.js';
import type { ViewSink } from '../../../directory-svc/view/view-watcher.js';
import { InstanceListing } from '../../../directory-svc/view/instance-listing.js';
import { decodeViewUpdate, type DecodedViewUpdate } from '../../helpers/view-model.js';
import { errorClass } from './discovery-fixtures.js';
import { TableInstances } from '../../helpers/instance-table-source.js';

const NAME = '10.0.0.5:8000';
const BASE = { name: NAME, rpc_address: '10.0.0.5:9000', type: 0, incarnation_id: 'inc-1' };

function reg(over: Record<string, unknown> = {}): InstanceRegistration {
  return parseInstanceValue('DEFAULT', NAME, JSON.stringify({ ...BASE, ...over }));
}

function rejection(models: unknown): string {
  try {
    reg({ models });
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
  return 'accepted';
}

describe('cache-identity §1 served models of etcd instances, in the view', () => {
  describe('instance JSON `models`', () => {
    it('CI5 first the base model, the rest its adapters; absent, null or [] is an unknown list', () => {
      expect(reg({ models: ['llama-3.1-8b', 'sql-lora'] }).models).to.deep.equal([
        { name: 'llama-3.1-8b', parent: null },
        { name: 'sql-lora', parent: 'llama-3.1-8b' },
      ]);
      expect(reg().models).to.equal(null);
      expect(reg({ models: null }).models).to.equal(null);
      expect(reg({ models: [] }).models).to.equal(null);
    });

    it('CI5 a bad list rejects that key (invalid_instance) naming models and what was expected', () => {
      expect(errorClass(() => reg({ models: 'llama' }))).to.equal('invalid_instance');
      expect(rejection('llama')).to.equal(`invalid_instance: ${NAME}: models: expected an array of model names (the base model first, then its adapters), got "llama"`);
      expect(rejection(['llama', 3])).to.equal(`invalid_instance: ${NAME}: models[1]: expected a non-empty string, got 3`);
      expect(rejection(['llama', ''])).to.equal(`invalid_instance: ${NAME}: models[1]: expected a non-empty string, got ""`);
      expect(rejection(['a', 'a'])).to.equal(`invalid_instance: ${NAME}: models[1]: "a" is listed twice`);
      expect(rejection({ base: 'a' })).to.match(/models: expected an array of model names/);
    });
  });

  describe('the instance table and the view', () => {
    let instances: TableInstances;
    let publisher: ViewPublisher;
    let sent: Buffer[];

    beforeEach(() => {
      instances = new TableInstances();
      publisher = new ViewPublisher({ flushIntervalMs: 3_600_000, epoch: 'e', nowMs: () => 0 });
      publisher.attachInstanceTable(instances);
      sent = [];
      const sink: ViewSink = { write: (b) => sent.push(b) > 0, onDrain: () => undefined, end: () => undefined };
      publisher.watch({ routerId: 'w', epoch: '', version: 0 }, sink);
      publisher.flush();
    });

    afterEach(() => publisher.close());

    const last = (): DecodedViewUpdate => decodeViewUpdate(sent.at(-1)!);

    it('CI6 a registration with models, then a refresh that changes them: upserts carrying the list and source "etcd" in the view', () => {
      instances.emit(instances.table.put(reg({ models: ['llama'] }), 0).changes);
      publisher.flush();
      const first = last().delta!.instance_upserts;
      expect(first.map((i) => [i.name, i.source, i.models])).to.deep.equal([[NAME, 'etcd', { data: [{ name: 'llama', parent: '' }] }]]);

      // The same registration again publishes nothing; an adapter added to it does.
      expect(instances.emit(instances.table.put(reg({ models: ['llama'] }), 1).changes)).to.deep.equal([]);
      const changed = instances.emit(instances.table.put(reg({ models: ['llama', 'sql-lora'] }), 2).changes);
      expect(changed.map((c) => c.kind)).to.deep.equal(['upsert']);
      publisher.flush();
      expect(last().delta!.instance_upserts[0]!.models).to.deep.equal({ data: [{ name: 'llama', parent: '' }, { name: 'sql-lora', parent: 'llama' }] });

      // Back to unknown (the field dropped): an unset message, which the router reads as "serves anything".
      instances.emit(instances.table.put(reg(), 3).changes);
      publisher.flush();
      expect(last().delta!.instance_upserts[0]!.models).to.equal(null);
    });

    it('CI6 an engines-file instance\'s scraped list change is an upsert in the next delta; ListInstances shows list and source', () => {
      const entry = parseEnginesFile(JSON.stringify({ engines: [{ name: 'vllm-0', url: 'http://h:8000', kind: 'vllm', event_endpoint: 'tcp://h:5557', block_size: 16 }] })).engines[0]!;
      instances.emit(instances.table.putEngine(entry, null, 0).changes);
      publisher.flush();
      expect(last().delta!.instance_upserts[0]).to.deep.include({ name: 'vllm-0', source: 'engines_file', models: null });
      instances.emit(instances.table.engineModels('vllm-0', [{ name: 'llama', parent: null }, { name: 'sql', parent: 'llama' }]));
      publisher.flush();
      expect(last().delta!.instance_upserts.map((i) => [i.name, i.models])).to.deep.equal([['vllm-0', { data: [{ name: 'llama', parent: '' }, { name: 'sql', parent: 'llama' }] }]]);
      const listed = new InstanceListing(instances).listInstances().instances[0]!;
      expect(listed).to.deep.include({ source: 'engines_file', models: { data: [{ name: 'llama', parent: '' }, { name: 'sql', parent: 'llama' }] } });
    });

    it('CI6 a fresh watch gets the lists in its snapshot', () => {
      instances.emit(instances.table.put(reg({ models: ['qwen3'] }), 0).changes);
      publisher.flush();
      const snap: Buffer[] = [];
      publisher.watch({ routerId: 'w2', epoch: '', version: 0 }, { write: (b) => snap.push(b) > 0, onDrain: () => undefined, end: () => undefined });
      const u = decodeViewUpdate(snap[0]!);
      const rows = u.snapshot?.instances ?? u.snapshot_chunk?.instances ?? [];
      expect(rows.map((i) => [i.name, i.source, i.models])).to.deep.equal([[NAME, 'etcd', { data: [{ name: 'qwen3', parent: '' }] }]]);
    });
  });
});
