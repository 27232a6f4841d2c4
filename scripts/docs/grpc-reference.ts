/**
 * The gRPC reference, generated from `proto/kvdirectory.proto` and its comments (parsed with
 * protobufjs, the parser under @grpc/proto-loader, in its mode that keeps `//` comments): the
 * service's RPCs, then every message and enum with its fields, numbers, types and comments.
 * Pure apart from reading the proto file.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { code, markdownTable } from './markdown-table.js';

export const PROTO_FILE = 'proto/kvdirectory.proto';

/** The whole generated reference body for the proto under `root`. */
export function grpcReferenceMarkdown(root: string): string {
  const source = readFileSync(join(root, PROTO_FILE), 'utf8');
  const parsed = protobuf.parse(source, { keepCase: true, alternateCommentMode: true });
  const pkg = parsed.package ?? '';
  const ns = pkg === '' ? parsed.root : parsed.root.lookup(pkg);
  if (!(ns instanceof protobuf.Namespace)) throw new Error(`${PROTO_FILE}: package ${pkg} not found`);
  const out: string[] = [];
  const header = fileComment(source);
  if (header !== '') out.push(`From the head of \`${PROTO_FILE}\`:`, '', quote(header), '');
  for (const obj of ns.nestedArray) {
    if (obj instanceof protobuf.Service) out.push(...serviceSection(pkg, obj));
  }
  out.push('### Messages', '');
  for (const obj of ns.nestedArray) {
    if (obj instanceof protobuf.Type) out.push(...messageSection(obj));
    else if (obj instanceof protobuf.Enum) out.push(...enumSection(obj));
  }
  return out.join('\n').trimEnd();
}

function serviceSection(pkg: string, svc: protobuf.Service): string[] {
  const rows = svc.methodsArray.map((m) => [
    code(m.name),
    `${m.requestStream === true ? 'stream ' : ''}${typeLink(m.requestType)}`,
    `${m.responseStream === true ? 'stream ' : ''}${typeLink(m.responseType)}`,
    oneLine(m.comment),
  ]);
  const lines = [`### Service \`${pkg}.${svc.name}\``, ''];
  if (svc.comment) lines.push(oneLine(svc.comment), '');
  lines.push(markdownTable(['rpc', 'request', 'response', 'what it does'], rows), '');
  return lines;
}

function messageSection(type: protobuf.Type): string[] {
  const lines = [`#### ${type.name}`, ''];
  if (type.comment) lines.push(oneLine(type.comment), '');
  if (type.fieldsArray.length === 0) {
    lines.push('No fields.', '');
    return lines;
  }
  const rows = type.fieldsArray.map((f) => [code(f.name), String(f.id), fieldType(f), fieldNote(f)]);
  lines.push(markdownTable(['field', 'number', 'type', 'meaning'], rows), '');
  return lines;
}

function enumSection(e: protobuf.Enum): string[] {
  const lines = [`#### ${e.name}`, ''];
  if (e.comment) lines.push(oneLine(e.comment), '');
  const rows = Object.entries(e.values).map(([name, value]) => [code(name), String(value), oneLine(e.comments[name] ?? null)]);
  lines.push(markdownTable(['value', 'number', 'meaning'], rows), '');
  return lines;
}

function fieldType(f: protobuf.Field): string {
  if (f instanceof protobuf.MapField) return `map<${f.keyType}, ${typeLink(f.type)}>`;
  return `${f.repeated ? 'repeated ' : ''}${typeLink(f.type)}`;
}

function fieldNote(f: protobuf.Field): string {
  const oneof = f.partOf === null ? '' : `One of \`${f.partOf.name}\`. `;
  return `${oneof}${oneLine(f.comment)}`.trim();
}

const SCALARS = new Set(['double', 'float', 'int32', 'int64', 'uint32', 'uint64', 'sint32', 'sint64', 'fixed32', 'fixed64', 'sfixed32', 'sfixed64', 'bool', 'string', 'bytes']);

/** A scalar as code, a message or enum of this file as a link to its section. */
function typeLink(name: string): string {
  if (SCALARS.has(name)) return code(name);
  return `[${name}](#${name.toLowerCase()})`;
}

function oneLine(comment: string | null): string {
  return (comment ?? '').replace(/\s*\n\s*/g, ' ').trim();
}

/** The `//` block before `syntax`: what the file says about itself. */
function fileComment(source: string): string {
  const lines: string[] = [];
  for (const line of source.split('\n')) {
    if (!line.startsWith('//')) break;
    lines.push(line.replace(/^\/\/ ?/, ''));
  }
  return lines.join('\n').trim();
}

function quote(text: string): string {
  return text
    .split('\n')
    .map((l) => (l === '' ? '>' : `> ${l}`))
    .join('\n');
}
