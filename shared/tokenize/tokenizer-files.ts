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

/** Reads and checks the files; throws ConfigError naming `--tokenizer`/`--chat_template` and the file. */
export function readTokenizerFiles(dirFlag: string, chatTemplateFlag: string): TokenizerFiles {
  const dir = resolve(dirFlag);
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir) throw fileError('--tokenizer', dir, 'no such directory');
  const tokenizerPath = join(dir, 'tokenizer.json');
  const tokenizerJson = readText('--tokenizer', tokenizerPath);
  const tokenizer = parseObject('--tokenizer', tokenizerPath, tokenizerJson);
  if (typeof tokenizer['model'] !== 'object' || tokenizer['model'] === null) throw fileError('--tokenizer', tokenizerPath, 'no "model" object (not a Hugging Face tokenizer.json)');
  const configPath = join(dir, 'tokenizer_config.json');
  const config = parseObject('--tokenizer', configPath, readText('--tokenizer', configPath));

  let chatTemplate: string | null = null;
  let chatTemplateSource = '';
  if (chatTemplateFlag !== '') {
    const path = resolve(chatTemplateFlag);
    chatTemplate = readText('--chat_template', path);
    if (chatTemplate.trim() === '') throw fileError('--chat_template', path, 'empty template');
    chatTemplateSource = path;
  } else {
    chatTemplate = configTemplate(config['chat_template'], configPath);
    if (chatTemplate !== null) chatTemplateSource = configPath;
  }
  const hash = createHash('sha256').update(tokenizerJson).update('\0').update(chatTemplate ?? '');
  return { dir, tokenizerJson, config, chatTemplate, chatTemplateSource, fingerprint: hash.digest('hex') };
}

/**
 * `chat_template` is a string, or a list of `{name, template}` (transformers: the one named
 * "default" is used when no name is asked for). Absent/null: no template.
 */
function configTemplate(value: unknown, configPath: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    for (const t of value) {
      if (typeof t === 'object' && t !== null && (t as Record<string, unknown>)['name'] === 'default') {
        const template = (t as Record<string, unknown>)['template'];
        if (typeof template === 'string') return template;
      }
    }
    throw fileError('--tokenizer', configPath, 'chat_template is a list without a {"name":"default","template":string} entry');
  }
  throw fileError('--tokenizer', configPath, 'chat_template must be a string or a list of {name, template}');
}

function readText(flag: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw fileError(flag, path, code === 'ENOENT' ? 'file not found' : `cannot read (${code ?? 'error'})`);
  }
}

function parseObject(flag: string, path: string, text: string): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw fileError(flag, path, `not JSON (${e instanceof Error ? e.message.split('\n', 1)[0] : 'parse error'})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw fileError(flag, path, 'must hold a JSON object');
  return json as Record<string, unknown>;
}

function fileError(flag: string, path: string, reason: string): ConfigError {
  return new ConfigError(flag, reason, `invalid ${flag}: ${path}: ${reason}`);
}
