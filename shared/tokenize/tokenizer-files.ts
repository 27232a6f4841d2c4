/**
 * A Hugging Face model directory's tokenizer files (tokenization.md §1): `tokenizer.json`,
 * `tokenizer_config.json` (chat template, special tokens) and an optional `--chat_template` file
 * that overrides the config's template. Read once at start-up; every problem is a ConfigError whose
 * one line names the flag and the file, so the process exits 2 before serving anything.
 * Nothing is ever downloaded: a directory that is not there is an error, not a hub lookup.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError } from '../config/config-error.js';

export interface TokenizerFiles {
  /** Absolute `--tokenizer` directory. */
  readonly dir: string;
  /** `tokenizer.json` as read (the encoder parses it). */
  readonly tokenizerJson: string;
  /** `tokenizer_config.json`, parsed. */
  readonly config: Readonly<Record<string, unknown>>;
  /** The chat template source, or null when neither the config nor `--chat_template` has one. */
  readonly chatTemplate: string | null;
  /** Where the template came from: `--chat_template` path, `tokenizer_config.json`, or '' when none. */
  readonly chatTemplateSource: string;
  /** sha256 (hex) over tokenizer.json and the template: equal on router and engine means equal ids. */
  readonly fingerprint: string;
}

/**
 * Where a tokenizer directory and template were named, for the one-line errors: the flag an error
 * is reported under and what precedes the file's path (a models-file entry's field).
 */
export interface TokenizerOrigin {
  readonly tokenizerFlag: string;
  readonly tokenizerWhere: string;
  readonly templateFlag: string;
  readonly templateWhere: string;
}

/** `--tokenizer DIR` and `--chat_template FILE`: `invalid --tokenizer: <path>: <reason>`. */
export const FLAG_ORIGIN: TokenizerOrigin = Object.freeze({ tokenizerFlag: '--tokenizer', tokenizerWhere: '', templateFlag: '--chat_template', templateWhere: '' });

/**
 * Reads and checks the files; throws ConfigError naming the flag (`origin`, default
 * `--tokenizer`/`--chat_template`) and the file.
 */
export function readTokenizerFiles(dirFlag: string, chatTemplateFlag: string, origin: TokenizerOrigin = FLAG_ORIGIN): TokenizerFiles {
  const tok = { flag: origin.tokenizerFlag, where: origin.tokenizerWhere };
  const tpl = { flag: origin.templateFlag, where: origin.templateWhere };
  const dir = resolve(dirFlag);
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir) throw fileError(tok, dir, 'no such directory');
  const tokenizerPath = join(dir, 'tokenizer.json');
  const tokenizerJson = readText(tok, tokenizerPath);
  const tokenizer = parseObject(tok, tokenizerPath, tokenizerJson);
  if (typeof tokenizer['model'] !== 'object' || tokenizer['model'] === null) throw fileError(tok, tokenizerPath, 'no "model" object (not a Hugging Face tokenizer.json)');
  const configPath = join(dir, 'tokenizer_config.json');
  const config = parseObject(tok, configPath, readText(tok, configPath));

  let chatTemplate: string | null = null;
  let chatTemplateSource = '';
  if (chatTemplateFlag !== '') {
    const path = resolve(chatTemplateFlag);
    chatTemplate = readText(tpl, path);
    if (chatTemplate.trim() === '') throw fileError(tpl, path, 'empty template');
    chatTemplateSource = path;
  } else {
    chatTemplate = configTemplate(config['chat_template'], configPath, tok);
    if (chatTemplate !== null) chatTemplateSource = configPath;
  }
  const hash = createHash('sha256').update(tokenizerJson).update('\0').update(chatTemplate ?? '');
  return { dir, tokenizerJson, config, chatTemplate, chatTemplateSource, fingerprint: hash.digest('hex') };
}

/**
 * `chat_template` is a string, or a list of `{name, template}` (transformers: the one named
 * "default" is used when no name is asked for). Absent/null: no template.
 */
function configTemplate(value: unknown, configPath: string, tok: Label): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    for (const t of value) {
      if (typeof t === 'object' && t !== null && (t as Record<string, unknown>)['name'] === 'default') {
        const template = (t as Record<string, unknown>)['template'];
        if (typeof template === 'string') return template;
      }
    }
    throw fileError(tok, configPath, 'chat_template is a list without a {"name":"default","template":string} entry');
  }
  throw fileError(tok, configPath, 'chat_template must be a string or a list of {name, template}');
}

/** The flag an error is reported under and what precedes the path (TokenizerOrigin). */
interface Label {
  readonly flag: string;
  readonly where: string;
}

function readText(label: Label, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw fileError(label, path, code === 'ENOENT' ? 'file not found' : `cannot read (${code ?? 'error'})`);
  }
}

function parseObject(label: Label, path: string, text: string): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw fileError(label, path, `not JSON (${e instanceof Error ? e.message.split('\n', 1)[0] : 'parse error'})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw fileError(label, path, 'must hold a JSON object');
  return json as Record<string, unknown>;
}

function fileError(label: Label, path: string, reason: string): ConfigError {
  return new ConfigError(label.flag, reason, `invalid ${label.flag}: ${label.where}${path}: ${reason}`);
}
