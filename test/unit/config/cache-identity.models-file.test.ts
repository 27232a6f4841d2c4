// cache-identity §5: `--models_file`, strict JSON; every bad field is one line naming the entry and
// the field, and a directory or template an entry names is checked when the router starts.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { ConfigError } from '../../../shared/config/config-error.js';
import { parseModelsFile, readModelsFile } from '../../../shared/config/models-file.js';
import { bundledQwen3TokenizerDir } from '../../../shared/tokenize/bundled-tokenizer.js';
import { ModelTokenizers } from '../../../shared/tokenize/model-tokenizers.js';

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

describe('cache-identity §5 --models_file', () => {
  let tmp: string;
  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'models-file-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('a valid file: each model with its tokenizer directory, chat_template optional', () => {
    expect(parseModelsFile('{"models":[{"model":"llama","tokenizer":"/m/llama","chat_template":"/t/llama.jinja"},{"model":"qwen3","tokenizer":"/m/qwen"}]}')).to.deep.equal([
      { model: 'llama', tokenizer: '/m/llama', chatTemplate: '/t/llama.jinja' },
      { model: 'qwen3', tokenizer: '/m/qwen', chatTemplate: '' },
    ]);
    expect(parseModelsFile('{"models":[]}')).to.deep.equal([]);
  });

  it('every bad field is named: the entry index and the field, with what was expected', () => {
    const cases: [string, string][] = [
      ['{"models": [', 'not valid JSON: '],
      ['[]', 'expected a JSON object, got an array'],
      ['{"models": [], "model": "x"}', 'model: unknown field (allowed: models)'],
      ['{}', 'models: required: an array of {"model", "tokenizer", "chat_template"?}'],
      ['{"models": {"model": "m"}}', 'models: expected an array, got an object'],
      ['{"models": ["qwen3"]}', 'models[0]: expected a JSON object, got "qwen3"'],
      ['{"models": [{"model": "m", "tokenizer": "/t", "tokenzier": "/u"}]}', 'models[0].tokenzier: unknown field (allowed: model, tokenizer, chat_template)'],
      ['{"models": [{"tokenizer": "/t"}]}', 'models[0].model: required: a non-empty string'],
      ['{"models": [{"model": "", "tokenizer": "/t"}]}', 'models[0].model: expected a non-empty string, got ""'],
      ['{"models": [{"model": 7, "tokenizer": "/t"}]}', 'models[0].model: expected a non-empty string, got 7'],
      ['{"models": [{"model": "m", "tokenizer": "/t"}, {"model": "m", "tokenizer": "/u"}]}', 'models[1].model: "m" already listed by models[0]'],
      ['{"models": [{"model": "m"}]}', 'models[0].tokenizer: required: a non-empty string'],
      ['{"models": [{"model": "m", "tokenizer": ["/t"]}]}', 'models[0].tokenizer: expected a non-empty string, got an array'],
      ['{"models": [{"model": "m", "tokenizer": "/t", "chat_template": ""}]}', 'models[0].chat_template: expected a non-empty string, got ""'],
      ['{"models": [{"model": "m", "tokenizer": "/t", "chat_template": null}]}', 'models[0].chat_template: expected a non-empty string, got null'],
    ];
    for (const [text, message] of cases) {
      const e = configError(() => parseModelsFile(text));
      if (message.endsWith(': ')) expect(e.message, text).to.match(new RegExp(`^${message}`));
      else expect(e.message, text).to.equal(message);
    }
  });

  it('read from disk: one line naming --models_file and the file, for a missing file and for a bad field', () => {
    const missing = join(tmp, 'nope.json');
    expect(configError(() => readModelsFile(missing)).message).to.equal(`invalid --models_file: ${missing}: cannot read (file not found)`);
    const bad = join(tmp, 'bad.json');
    writeFileSync(bad, '{"models": [{"model": "m", "tokenizer": 5}]}');
    const e = configError(() => readModelsFile(bad));
    expect(e.path).to.equal('--models_file');
    expect(e.message).to.equal(`invalid --models_file: ${bad}: models[0].tokenizer: expected a non-empty string, got 5`);
  });

  it('at start-up every entry\'s files are loaded and checked: a missing directory or template names the entry\'s field and the path', () => {
    const file = join(tmp, 'models.json');
    const load = (models: { model: string; tokenizer: string; chatTemplate: string }[]): ModelTokenizers =>
      ModelTokenizers.load({ models, modelsFile: file, defaultDir: '', defaultTemplate: '', renderThreads: 0 });
    const qwen = bundledQwen3TokenizerDir();
    const noDir = join(tmp, 'no-such-model');
    expect(configError(() => load([{ model: 'a', tokenizer: qwen, chatTemplate: '' }, { model: 'b', tokenizer: noDir, chatTemplate: '' }])).message).to.equal(
      `invalid --models_file: ${file}: models[1].tokenizer: ${resolve(noDir)}: no such directory`,
    );
    const noTemplate = join(tmp, 'missing.jinja');
    expect(configError(() => load([{ model: 'a', tokenizer: qwen, chatTemplate: noTemplate }])).message).to.equal(
      `invalid --models_file: ${file}: models[0].chat_template: ${noTemplate}: file not found`,
    );
    const broken = join(tmp, 'broken.jinja');
    writeFileSync(broken, '{% if %}');
    const parse = configError(() => load([{ model: 'a', tokenizer: qwen, chatTemplate: broken }]));
    expect(parse.path).to.equal('--models_file');
    expect(parse.message).to.match(new RegExp(`^invalid --models_file: ${file}: models\\[0\\]: invalid chat template ${broken}: chat template does not parse`));
  });
});
