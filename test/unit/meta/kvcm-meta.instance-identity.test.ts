// kvcm-meta §4.1 registration rules and identity, as pure functions (the HTTP-level I-01..I-04
// run in test/integration/kvcm-meta.instances.test.ts).
import { expect } from 'chai';
import { identityDifferences, mutableFieldsDiffer, sameIdentity, withMutableFieldsOf } from '../../../meta-svc/instances/instance-identity.js';
import { isValidInstanceId, parseRegistration } from '../../../meta-svc/instances/registration.js';
import type { InstanceRecord } from '../../../meta-svc/store/meta-store.js';
import { parseJson } from '../../../meta-svc/wire/json-parse.js';
import { RequestReader } from '../../../meta-svc/wire/request-reader.js';

const base: InstanceRecord = {
  instanceId: 'i',
  instanceGroup: 'g',
  blockSize: 8,
  locationSpecInfos: [
    { name: 'a', size: 1n },
    { name: 'b', size: 2n },
  ],
  locationSpecGroups: [{ name: 'x', specNames: ['a', 'b'] }],
  modelDeployment: null,
  defaultQueryType: 0,
};

/** The §1.4 entries of the invalid fields, or the record. */
const parse = (body: unknown) => {
  const r = parseRegistration(RequestReader.ofBody(parseJson(JSON.stringify(body))), (g) => g === 'g');
  return r.ok ? r : { ok: false, invalidFields: r.invalidFields.map((f) => f.entry) };
};

describe('kvcm-meta §4.1 identity', () => {
  it('I-02 ignores the order of specs, spec groups and group members; user_data and default_query_type are mutable', () => {
    const reordered: InstanceRecord = {
      ...base,
      locationSpecInfos: [base.locationSpecInfos[1]!, base.locationSpecInfos[0]!],
      locationSpecGroups: [{ name: 'x', specNames: ['b', 'a'] }],
      defaultQueryType: 3,
      modelDeployment: { modelName: '', dtype: '', useMla: false, tpSize: 0, dpSize: 0, loraName: '', ppSize: 0, extra: '', userData: 'u', useEaglePop: false },
    };
    expect(sameIdentity(base, reordered)).to.equal(true);
    expect(mutableFieldsDiffer(base, reordered)).to.equal(true);
    const merged = withMutableFieldsOf(base, reordered);
    expect(merged.defaultQueryType).to.equal(3);
    expect(merged.modelDeployment?.userData).to.equal('u');
    expect(merged.locationSpecInfos).to.equal(base.locationSpecInfos);
  });

  it('I-03 block size, spec sizes, spec set, group members, group and deployment fields are identity', () => {
    const md = { modelName: 'm', dtype: '', useMla: false, tpSize: 0, dpSize: 0, loraName: '', ppSize: 0, extra: '', userData: '', useEaglePop: false };
    for (const other of [
      { ...base, blockSize: 16 },
      { ...base, instanceGroup: 'h' },
      { ...base, locationSpecInfos: [{ name: 'a', size: 1n }, { name: 'b', size: 3n }] },
      { ...base, locationSpecInfos: [{ name: 'a', size: 1n }, { name: 'c', size: 2n }] },
      { ...base, locationSpecGroups: [{ name: 'x', specNames: ['a'] }] },
      { ...base, locationSpecGroups: [] },
      { ...base, modelDeployment: md },
    ]) {
      expect(sameIdentity(base, other)).to.equal(false);
    }
  });

  it('I-06 the differing identity fields are listed in §1.4 order', () => {
    const md = { modelName: 'm', dtype: '', useMla: false, tpSize: 0, dpSize: 0, loraName: '', ppSize: 0, extra: '', userData: '', useEaglePop: false };
    expect(identityDifferences(base, { ...base, modelDeployment: md, blockSize: 16 })).to.deep.equal(['block_size', 'model_deployment']);
    expect(identityDifferences(base, { ...base, instanceGroup: 'h', locationSpecGroups: [], locationSpecInfos: [] })).to.deep.equal([
      'instance_group',
      'location_spec_infos',
      'location_spec_groups',
    ]);
    expect(identityDifferences(base, { ...base, modelDeployment: { ...md, modelName: '', userData: 'other' } })).to.deep.equal([]);
  });
});

describe('kvcm-meta §4.1 registration validation', () => {
  it('I-04 collects every invalid field in field-number order', () => {
    const r = parse({ instance_group: 'nope', instance_id: '', block_size: 0, location_spec_infos: [], location_spec_groups: [{ name: 'x', spec_names: [] }] });
    // A missing or empty field is named; a present but invalid one carries its value (KVCM parity).
    expect(r).to.deep.equal({
      ok: false,
      invalidFields: ['instance_group="nope"', 'instance_id', 'block_size=0', 'location_spec_infos', 'location_spec_groups=[{"name":"x","spec_names":[]}]'],
    });
    expect(parse({ instance_id: 'i', location_spec_infos: [{ name: 'a', size: 0 }] })).to.deep.equal({
      ok: false,
      invalidFields: ['instance_group', 'block_size', 'location_spec_infos=[{"name":"a","size":"0"}]'],
    });
    const long = parse({ instance_group: 'g'.repeat(300), instance_id: 'i', block_size: 1, location_spec_infos: [{ name: 'a', size: 1 }] });
    expect(long).to.deep.equal({ ok: false, invalidFields: [`instance_group="${'g'.repeat(127)}`] });
    const dupGroups = parse({
      instance_group: 'g',
      instance_id: 'i',
      block_size: 1,
      location_spec_infos: [{ name: 'a', size: 1 }],
      location_spec_groups: [
        { name: 'x', spec_names: ['a'] },
        { name: 'x', spec_names: ['a'] },
      ],
    });
    expect(dupGroups).to.deep.equal({ ok: false, invalidFields: ['location_spec_groups=[{"name":"x","spec_names":["a"]},{"name":"x","spec_names":["a"]}]'] });
  });

  it('I-01 a valid body becomes a record with exact int64 sizes', () => {
    const r = parseRegistration(
      RequestReader.ofBody(parseJson('{"instance_group":"g","instance_id":"i","block_size":"4","location_spec_infos":[{"name":"a","size":9007199254740993}],"default_query_type":"QT_BATCH_GET"}')),
      (g) => g === 'g',
    );
    expect(r.ok).to.equal(true);
    if (!r.ok) return;
    expect(r.record).to.deep.equal({
      instanceId: 'i',
      instanceGroup: 'g',
      blockSize: 4,
      locationSpecInfos: [{ name: 'a', size: 9007199254740993n }],
      locationSpecGroups: [],
      modelDeployment: null,
      defaultQueryType: 1,
    });
  });

  it('instance ids are 1–256 bytes without control characters', () => {
    expect(isValidInstanceId('a')).to.equal(true);
    expect(isValidInstanceId('é'.repeat(128))).to.equal(true);
    expect(isValidInstanceId('é'.repeat(129))).to.equal(false);
    expect(isValidInstanceId('')).to.equal(false);
    expect(isValidInstanceId('a\u0000')).to.equal(false);
    expect(isValidInstanceId('a\u0085')).to.equal(false);
  });
});
