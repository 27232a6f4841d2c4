/**
 * The router's `--models_file` (cache-identity §5): each model's tokenizer directory and optional
 * chat template, so a fleet of several models credits each request with the ids its own engine
 * computes.
 *
 *   {"models": [{"model": "llama-3.1-8b", "tokenizer": "/models/llama", "chat_template": "/opt/llama.jinja"}]}
 *
 * Strict: JSON without comments, unknown fields rejected (a misspelt `chat_tempalte` would
 * otherwise silently render the wrong prompt), every error a ConfigError naming the entry and the
 * field (`models[1].tokenizer`). Pure apart from `readModelsFile`, which reads the file; the
 * tokenizer files themselves are read by shared/tokenize/model-tokenizers.ts.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from './config-error.js';
import { jsonRootList } from './json-root-list.js';
import { object, show, unknownFields } from './kv-events-config.js';

/** One model's tokenizer (frozen). */
export interface ModelTokenizerEntry {
  /** The name requests use (`model`), as the engines list it in `/v1/models`. */
  readonly model: string;
  /** A Hugging Face model directory with tokenizer.json and tokenizer_config.json (tokenization.md §1). */
  readonly tokenizer: string;
  /** A Jinja template overriding tokenizer_config.json's; '' = the config's own. */
  readonly chatTemplate: string;
}

const ENTRY_FIELDS = ['model', 'tokenizer', 'chat_template'] as const;

/**
 * Reads and validates `--models_file` PATH; throws ConfigError whose one line names the flag, the
 * file and the entry's field: `invalid --models_file: /etc/models.json: models[1].tokenizer: ...`.
 */
export function readModelsFile(path: string): readonly ModelTokenizerEntry[] {
  const fail = (detail: string): ConfigError => new ConfigError('--models_file', detail, `invalid --models_file: ${path}: ${detail}`);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : 'error';
    throw fail(`cannot read (${code === 'ENOENT' ? 'file not found' : code})`);
  }
  try {
    return parseModelsFile(text);
  } catch (e) {
    if (e instanceof ConfigError) throw fail(e.message);
    throw e;
  }
}

/** Parses the file's text; throws ConfigError naming `models[i].field` ('' for bad JSON). */
export function parseModelsFile(text: string): readonly ModelTokenizerEntry[] {
  const list = jsonRootList(text, 'models', 'required: an array of {"model", "tokenizer", "chat_template"?}');
  const seen = new Map<string, number>();
  const out: ModelTokenizerEntry[] = [];
  for (let i = 0; i < list.length; i++) {
    const path = `models[${i}]`;
    const o = object(list[i], path);
    unknownFields(o, ENTRY_FIELDS, path);
    const model = nonEmpty(o, 'model', path, true);
    const dup = seen.get(model);
    if (dup !== undefined) throw new ConfigError(`${path}.model`, `${JSON.stringify(model)} already listed by models[${dup}]`);
    seen.set(model, i);
    out.push(Object.freeze({ model, tokenizer: nonEmpty(o, 'tokenizer', path, true), chatTemplate: nonEmpty(o, 'chat_template', path, false) }));
  }
  return Object.freeze(out);
}

/** A non-empty string field; '' when absent and not required. */
function nonEmpty(o: Readonly<Record<string, unknown>>, field: string, parent: string, required: boolean): string {
  const v = o[field];
  if (v === undefined) {
    if (required) throw new ConfigError(`${parent}.${field}`, 'required: a non-empty string');
    return '';
  }
  if (typeof v !== 'string' || v === '') throw new ConfigError(`${parent}.${field}`, `expected a non-empty string, got ${show(v)}`);
  return v;
}
