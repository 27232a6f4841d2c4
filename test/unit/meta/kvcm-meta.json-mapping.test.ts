// kvcm-meta §1.3 JSON mapping: the lossless parser, the typed request reader and the compact
// writer, without HTTP (the transport suite covers the same rules over a real server).
import { expect } from 'chai';
import { JsonNumber, JsonParseError, parseJson } from '../../../meta-svc/wire/json-parse.js';
import { RequestReader } from '../../../meta-svc/wire/request-reader.js';
import { writeJson } from '../../../meta-svc/wire/response-writer.js';
import { jsonTextOf } from '../../../meta-svc/wire/json-text.js';
import { encodeSpecs } from '../../../meta-svc/store/sqlite-meta-store.js';
import { BadRequestError, missingFieldsMessage } from '../../../meta-svc/meta-errors.js';
import { ErrorCode, QueryType, StorageType, enumName, UnknownEnumValueError } from '../../../meta-svc/meta-enums.js';

const reader = (text: string): RequestReader => RequestReader.ofBody(parseJson(text));

function badRequest(fn: () => unknown): BadRequestError {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(BadRequestError);
    return e as BadRequestError;
  }
  throw new Error('expected a BadRequestError');
}

function parseFails(text: string): JsonParseError {
  try {
    parseJson(text);
  } catch (e) {
    expect(e).to.be.instanceOf(JsonParseError);
    return e as JsonParseError;
  }
  throw new Error(`expected ${JSON.stringify(text)} to fail`);
}

describe('kvcm-meta §1.3 JSON parser', () => {
  it('keeps numbers as their exact source text (9007199254740993 survives)', () => {
    const v = parseJson('{"k":9007199254740993,"f":-1.5e-3}') as Map<string, unknown>;
    expect((v.get('k') as JsonNumber).raw).to.equal('9007199254740993');
    expect((v.get('f') as JsonNumber).raw).to.equal('-1.5e-3');
  });

  it('decodes every escape and surrogate pair', () => {
    const v = parseJson('"a\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00😀"');
    expect(v).to.equal('a"\\/\b\f\n\r\té😀😀');
  });

  it('rejects malformed text with a JsonParseError and its offset', () => {
    for (const bad of ['{bad', '', '   ', '[1,]', '{"a":1,}', '01', '1.', '-', '1e', '"\\x"', '"\\ud800"', '"\\udc00x"', 'tru', '"a\nb"', '{"a" 1}', 'nul']) {
      parseFails(bad);
    }
    expect(parseFails('{} x').reason).to.match(/trailing/);
    expect(parseFails('{"a":1} {"b":2}').offset).to.equal(8);
  });

  it('rejects a key given twice in one object', () => {
    expect(parseFails('{"a":1,"a":2}').reason).to.match(/duplicate key/);
  });

  it('bounds nesting depth and text size', () => {
    expect(() => parseJson('['.repeat(50) + ']'.repeat(50), { maxDepth: 50, maxChars: 1000 })).not.to.throw();
    expect(parseFails('['.repeat(101) + ']'.repeat(101)).reason).to.match(/nesting/);
    expect(() => parseJson('"aaaa"', { maxDepth: 10, maxChars: 5 })).to.throw(JsonParseError);
  });

  it('keeps __proto__ as plain data', () => {
    const v = parseJson('{"__proto__":{"x":1}}') as Map<string, unknown>;
    expect(v.has('__proto__')).to.equal(true);
    expect(({} as Record<string, unknown>)['x']).to.equal(undefined);
  });
});

describe('kvcm-meta §1.3 request reader', () => {
  it('T-01 int64 as number or decimal string, exactly (9007199254740993)', () => {
    const r = reader('{"block_keys":[9007199254740993,"9007199254740993","-9223372036854775808",9223372036854775807,"007"],"x":"123"}');
    expect(r.int64List('block_keys')).to.deep.equal([9007199254740993n, 9007199254740993n, -(2n ** 63n), 2n ** 63n - 1n, 7n]);
    expect(r.int64('x')).to.equal(123n);
    expect(reader('{"x":1e3}').int64('x')).to.equal(1000n);
    expect(reader('{"x":2.0}').int64('x')).to.equal(2n);
  });

  it('T-02 int64 fraction, out of range or non-numeric → BadRequestError naming the field', () => {
    expect(badRequest(() => reader('{"block_keys":["abc"]}').int64List('block_keys')).reason).to.match(/block_keys\[0\]/);
    expect(badRequest(() => reader('{"block_keys":[1.5]}').int64List('block_keys')).reason).to.match(/block_keys\[0\]/);
    badRequest(() => reader('{"k":9223372036854775808}').int64('k'));
    badRequest(() => reader('{"k":"-9223372036854775809"}').int64('k'));
    badRequest(() => reader('{"k":"1.0"}').int64('k'));
    badRequest(() => reader('{"k":" 1"}').int64('k'));
    badRequest(() => reader('{"k":"+1"}').int64('k'));
    badRequest(() => reader('{"k":""}').int64('k'));
    badRequest(() => reader('{"k":true}').int64('k'));
    badRequest(() => reader('{"k":1e400}').int64('k'));
    badRequest(() => reader(`{"k":${'9'.repeat(41)}}`).int64('k'));
    badRequest(() => reader(`{"k":-${'9'.repeat(40)}}`).int64('k'));
    expect(reader('{"k":-0}').int64('k')).to.equal(0n);
    expect(reader('{"k":-9223372036854775808}').int64('k')).to.equal(-(2n ** 63n));
    badRequest(() => reader('{"block_keys":5}').int64List('block_keys'));
    badRequest(() => reader('{"block_keys":[null]}').int64List('block_keys'));
  });

  it('int32 and uint64 are range-checked', () => {
    expect(reader('{"a":2147483647,"b":"-2147483648"}').int32('a')).to.equal(2147483647);
    expect(reader('{"b":"-2147483648"}').int32('b')).to.equal(-2147483648);
    badRequest(() => reader('{"a":2147483648}').int32('a'));
    expect(reader('{"u":"18446744073709551615"}').uint64('u')).to.equal(2n ** 64n - 1n);
    badRequest(() => reader('{"u":-1}').uint64('u'));
  });

  it('T-01 finds a field by snake_case or lowerCamelCase; both spellings → 400', () => {
    expect(reader('{"queryType":2}').int32('query_type')).to.equal(2);
    expect(reader('{"query_type":2}').int32('query_type')).to.equal(2);
    expect(reader('{"locationSpecInfos":[{"name":"a"}]}').messages('location_spec_infos')[0]?.str('name')).to.equal('a');
    const e = badRequest(() => reader('{"block_keys":[1],"blockKeys":[2]}').int64List('block_keys'));
    expect(e.reason).to.match(/both block_keys and blockKeys/);
  });

  it('T-01 enums by exact name or number; T-03 unknown name or number → 0', () => {
    expect(reader('{"query_type":"QT_PREFIX_MATCH"}').enumOf('query_type', QueryType)).to.equal(2);
    expect(reader('{"query_type":2}').enumOf('query_type', QueryType)).to.equal(2);
    expect(reader('{"query_type":"qt_prefix_match"}').enumOf('query_type', QueryType)).to.equal(0);
    expect(reader('{"query_type":"NOPE"}').enumOf('query_type', QueryType)).to.equal(0);
    expect(reader('{"query_type":77}').enumOf('query_type', QueryType)).to.equal(0);
    expect(reader('{"t":["ST_NFS",8,"x"]}').enumList('t', StorageType)).to.deep.equal([4, 8, 0]);
    badRequest(() => reader('{"query_type":1.5}').enumOf('query_type', QueryType));
    badRequest(() => reader('{"query_type":true}').enumOf('query_type', QueryType));
  });

  it('null is absent; absent fields give protobuf defaults', () => {
    const r = reader('{"a":null,"b":null,"c":null,"blockKeys":null,"block_keys":[1]}');
    expect(r.has('a')).to.equal(false);
    expect(r.str('a')).to.equal('');
    expect(r.bool('b')).to.equal(false);
    expect(r.int64('c')).to.equal(0n);
    expect(r.int64List('block_keys')).to.deep.equal([1n]);
    expect(r.message('a')).to.equal(null);
    expect(r.messages('a')).to.deep.equal([]);
    expect(r.map('a').size).to.equal(0);
    expect(r.keys()).to.deep.equal(['block_keys']);
  });

  it('T-03 unknown fields are ignored at every depth', () => {
    const r = reader('{"zz":{"deep":[1,{"x":"y"}]},"block_mask":{"offset":1,"unknown":[null]}}');
    expect(r.message('block_mask')?.int32('offset')).to.equal(1);
  });

  it('strings, bools, maps and sub-messages reject other JSON types, naming the nested path', () => {
    badRequest(() => reader('{"s":1}').str('s'));
    badRequest(() => reader('{"b":"true"}').bool('b'));
    badRequest(() => reader('{"m":[]}').message('m'));
    expect(badRequest(() => reader('{"ms":[{"size":"x"}]}').messages('ms')[0]?.int64('size')).reason).to.match(/ms\[0\]\.size/);
    expect(reader('{"p":{"a":"1"}}').map('p').get('a')).to.equal('1');
    badRequest(() => reader('{"p":{"a":1}}').map('p'));
    badRequest(() => reader('{"l":["a",1]}').strList('l'));
    badRequest(() => RequestReader.ofBody(parseJson('[]')));
    badRequest(() => RequestReader.ofBody(parseJson('"x"')));
  });
});

describe('kvcm-meta §1.3 response writer', () => {
  it('writes compactly: bigint → string, numbers, bools, nested; undefined members omitted', () => {
    const text = writeJson({ a: 1n, b: -9223372036854775808n, c: 3, d: true, e: [], f: {}, g: undefined, h: [{ x: 'é"' }], m: new Map([['k', 'v']]) });
    expect(text).to.equal('{"a":"1","b":"-9223372036854775808","c":3,"d":true,"e":[],"f":{},"h":[{"x":"é\\""}],"m":{"k":"v"}}');
  });

  it('refuses values that cannot be a response', () => {
    expect(() => writeJson({ a: Number.NaN })).to.throw(/non-finite/);
    expect(() => writeJson({ a: () => 1 })).to.throw(/unserializable/);
  });

  it('prints exactly what the member-by-member reference writer prints (tricky strings, keys, shapes)', () => {
    const tricky = [
      '',
      'plain ascii',
      'quote " and backslash \\ and slash /',
      'é ü ß 中文 😀 \ud83d\ude00',
      'lone \ud800 high, lone \udc00 low, reversed \udc00\ud800',
      Array.from({ length: 0x20 }, (_, c) => String.fromCharCode(c)).join(''),
      '\u007f \u0080 \u2028 \u2029 \ufeff \uffff',
      'a"b\\c\nd\te\u0000',
    ];
    const values: unknown[] = [
      ...tricky,
      tricky.map((t) => ({ [t]: t, name: t, uri: `event_report://h/${t}` })),
      { header: { status: { code: 'OK', message: tricky[4] }, request_id: '0'.repeat(32), tracer_result: '' }, locations: [] },
      { locations: Array.from({ length: 50 }, (_, i) => ({ type: 'ST_NFS', spec_size: i % 3, location_specs: [{ name: tricky[i % tricky.length], uri: `file:///${i}` }] })) },
      { a: 1n, b: [1n, -9223372036854775808n], c: { d: 18446744073709551615n } },
      { keep: 'x', gone: undefined, alsoGone: null, nested: { n: null, u: undefined, z: 0 } },
      { nums: [0, -0, 1.5, -2147483648, 2147483647, 1e21, 5e-7, Number.MAX_SAFE_INTEGER] },
      { m: new Map<string, unknown>([['k', 'v'], ['"q"', tricky[5]], ['n', null], ['__proto__', 'p']]) },
      { raw: parseJson('{"a":12345678901234567890,"b":[1e400,-0.0]}') },
      Object.assign(Object.create(null) as object, { nullProto: true, s: tricky[3] }),
      { arr: [[[]], [{}], [true, false]], empty: {}, emptyArr: [] },
      { item_results: [], committed_snapshot_version: '', retry_after_ms: 0n, snapshot_required: false, extra_info: '' },
      { '1': 'integer-like keys first', b: 2, '0': 'zero', a: 1 },
      nest(64, 'deepest allowed'),
    ];
    values.forEach((v, i) => expect(writeJson(v)).to.equal(referenceWriteJson(v), `value #${i}`));
    for (const bad of [nest(65, 'x'), nest(66, 1n), { a: [1, null] }, { a: [undefined] }, [1, , 3], { n: Number.NaN }, { n: [Infinity] }, { f: () => 1 }, { s: Symbol('s') }, null]) {
      expect(() => referenceWriteJson(bad)).to.throw(/response_serialize/);
      expect(() => writeJson(bad)).to.throw(/response_serialize/);
    }
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic['self'] = cyclic;
    expect(() => writeJson(cyclic)).to.throw(/nesting too deep/);
  });

  it('echoes parsed opaque JSON exactly', () => {
    const src = '{"a":1,"b":[null,true,"x"],"c":{"d":12345678901234567890}}';
    expect(jsonTextOf(parseJson(src))).to.equal(src);
  });
});

describe('kvcm-meta §9.1 stored spec text', () => {
  it('encodeSpecs equals JSON.stringify of the [name, uri] pairs, escapes included', () => {
    const strings = ['tp0', 'event_report://h:9600/gpu/1?size=4096&s_version=0123456789abcdef0123456789abcdef', '', 'q"uo\\te', 'é😀中', 'lone \ud800 \udfff', '\u0000\u001f\u007f\u2028', 'a\nb\tc'];
    const lists = [[], ...strings.map((s) => [{ name: s, uri: s }]), strings.map((s, i) => ({ name: `n${i}${s}`, uri: `x://${s}` }))];
    for (const specs of lists) expect(encodeSpecs(specs)).to.equal(JSON.stringify(specs.map((x) => [x.name, x.uri])));
  });
});

describe('kvcm-meta §2 enums and §1.4 messages', () => {
  it('maps numbers to names and refuses unknown numbers on output', () => {
    expect(enumName(ErrorCode, 13)).to.equal('SNAPSHOT_RATE_LIMITED');
    expect(enumName(StorageType, 4)).to.equal('ST_NFS');
    expect(() => enumName(ErrorCode, 12)).to.throw(UnknownEnumValueError);
  });

  it('builds the missing-fields message of §1.4', () => {
    expect(missingFieldsMessage('RegisterInstance', ['instance_group'])).to.equal('missing or invalid fields: {RegisterInstance: {instance_group}}');
    expect(missingFieldsMessage('RegisterInstance', ['instance_group', 'block_size'])).to.equal(
      'missing or invalid fields: {RegisterInstance: {instance_group, block_size}}',
    );
  });
});

/** `depth` nested arrays around `leaf`. */
function nest(depth: number, leaf: unknown): unknown {
  let v: unknown = leaf;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** The writer before its JSON.stringify fast path, kept as the byte-for-byte reference. */
function referenceWriteJson(v: unknown): string {
  const out: string[] = [];
  const write = (x: unknown, depth: number): void => {
    if (depth > 64) throw new Error('response_serialize: nesting too deep (cycle?)');
    switch (typeof x) {
      case 'string':
        out.push(JSON.stringify(x));
        return;
      case 'bigint':
        out.push('"', x.toString(), '"');
        return;
      case 'number':
        if (!Number.isFinite(x)) throw new Error(`response_serialize: non-finite number ${x}`);
        out.push(String(x));
        return;
      case 'boolean':
        out.push(x ? 'true' : 'false');
        return;
      case 'object': {
        if (x === null) throw new Error('response_serialize: null value outside an object member');
        if (x instanceof JsonNumber) {
          out.push(x.raw);
          return;
        }
        if (Array.isArray(x)) {
          out.push('[');
          for (let i = 0; i < x.length; i++) {
            if (i > 0) out.push(',');
            const item: unknown = x[i];
            if (item === undefined || item === null) throw new Error('response_serialize: null array element');
            write(item, depth + 1);
          }
          out.push(']');
          return;
        }
        const entries: [string, unknown][] = x instanceof Map ? [...(x as Map<unknown, unknown>)].map(([k, val]) => [String(k), val]) : Object.keys(x).map((k) => [k, (x as Record<string, unknown>)[k]]);
        out.push('{');
        let first = true;
        for (const [k, val] of entries) {
          if (val === undefined || val === null) continue;
          if (!first) out.push(',');
          first = false;
          out.push(JSON.stringify(k), ':');
          write(val, depth + 1);
        }
        out.push('}');
        return;
      }
      default:
        throw new Error(`response_serialize: unserializable ${typeof x}`);
    }
  };
  write(v, 0);
  return out.join('');
}
