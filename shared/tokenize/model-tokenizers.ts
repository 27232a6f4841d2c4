/**
 * One tokenizer per model (cache-identity §5): the `--models_file` entries, each a PromptTokenizer
 * with its own chat template, chat threads, rendered-prefix (segment) cache and shadow-checked
 * compiled template, plus `--tokenizer` as the default. Loaded and validated at start-up, all of
 * them: a bad entry is one ConfigError line (exit 2) naming the file, the entry and the field.
 *
 * Lookup for a request of model `m`: m's own entry, else (an adapter) its parent's entry, else
 * `--tokenizer`, else — a request without a model in a fleet whose lists name none — the file's
 * only entry when it has exactly one. `--tokenizer` alone keeps its old meaning: one tokenizer for
 * every model. Entries naming the same directory and template share one loaded tokenizer.
 *
 * Resources are split, not multiplied: the chat threads (`renderThreads`) and the segment-cache
 * budget are divided between the distinct tokenizers, so ten models do not start ten times the
 * threads or hold ten times the memory of one.
 */
import { resolve } from 'node:path';
import { ConfigError, isConfigError } from '../config/config-error.js';
import type { ModelTokenizerEntry } from '../config/models-file.js';
import { PromptTokenizer } from './prompt-tokenizer.js';
import { DEFAULT_SEGMENT_CACHE_BYTES } from './token-encoder.js';

export interface ModelTokenizersOptions {
  /** `--models_file`'s entries ([] without one). */
  readonly models: readonly ModelTokenizerEntry[];
  /** `--models_file`, for error lines. */
  readonly modelsFile: string;
  /** `--tokenizer` ('' = none) and `--chat_template` ('' = the directory's own). */
  readonly defaultDir: string;
  readonly defaultTemplate: string;
  /** Chat threads over all tokenizers (defaultRenderThreads()); 0 = every chat on the event loop. */
  readonly renderThreads: number;
  /** false: templates are always interpreted (benchmarks compare); default true. */
  readonly compileTemplate?: boolean;
  /** Told once per tokenizer when its shadow check switches its compiled template off; `label` names its models. */
  readonly onTemplateSwitchOff?: (label: string, reason: string) => void;
}

/** One model's tokenizer as `/v1/status` lists it. */
export interface ModelTokenizer {
  readonly model: string;
  readonly tokenizer: PromptTokenizer;
}

export class ModelTokenizers {
  private constructor(
    private readonly byModel: ReadonlyMap<string, PromptTokenizer>,
    /** `--tokenizer` (the tokenizer of every model the file does not name); null without it. */
    readonly fallback: PromptTokenizer | null,
    /** Every distinct tokenizer loaded (closed once each). */
    private readonly loaded: readonly PromptTokenizer[],
  ) {}

  /** No tokenizer at all: every text request is routed by load (`no_tokenizer`). */
  static readonly NONE = new ModelTokenizers(new Map(), null, []);

  /** `--tokenizer` alone (or nothing): one tokenizer for every model. */
  static single(tokenizer: PromptTokenizer | null): ModelTokenizers {
    return tokenizer === null ? ModelTokenizers.NONE : new ModelTokenizers(new Map(), tokenizer, [tokenizer]);
  }

  /** Loads every entry and the default; throws ConfigError (`invalid --models_file: ...` for an entry). */
  static load(opts: ModelTokenizersOptions): ModelTokenizers {
    // Distinct (directory, template) pairs, each loaded once; the default first.
    const sources: { dir: string; template: string; models: string[]; entry: number }[] = [];
    const sourceOf = (dir: string, template: string, model: string | null, entry: number): number => {
      const key = (d: string, t: string): string => `${resolve(d)}\u0000${t === '' ? '' : resolve(t)}`;
      const k = key(dir, template);
      let i = sources.findIndex((s) => key(s.dir, s.template) === k);
      if (i < 0) i = sources.push({ dir, template, models: [], entry }) - 1;
      if (model !== null) sources[i]!.models.push(model);
      return i;
    };
    const defaultSource = opts.defaultDir === '' ? -1 : sourceOf(opts.defaultDir, opts.defaultTemplate, null, -1);
    const entrySources = opts.models.map((e, i) => sourceOf(e.tokenizer, e.chatTemplate, e.model, i));
    const n = sources.length;
    const threads = opts.renderThreads <= 0 || n === 0 ? 0 : Math.max(1, Math.floor(opts.renderThreads / n));
    const cacheBytes = n === 0 ? DEFAULT_SEGMENT_CACHE_BYTES : Math.floor(DEFAULT_SEGMENT_CACHE_BYTES / n);
    const loaded: PromptTokenizer[] = [];
    try {
      for (const s of sources) loaded.push(loadSource(s, opts, threads, cacheBytes));
    } catch (e) {
      for (const t of loaded) void t.close();
      throw e;
    }
    const byModel = new Map<string, PromptTokenizer>();
    opts.models.forEach((e, i) => byModel.set(e.model, loaded[entrySources[i]!]!));
    return new ModelTokenizers(byModel, defaultSource < 0 ? null : loaded[defaultSource]!, loaded);
  }

  /** True when no tokenizer was configured at all. */
  get isEmpty(): boolean {
    return this.loaded.length === 0;
  }

  /**
   * The tokenizer of a request for `model` (null: the request named none and the view knows none),
   * an adapter of `parent` (null: a base model); null when none applies.
   */
  forModel(model: string | null, parent: string | null): PromptTokenizer | null {
    if (model !== null) {
      const own = this.byModel.get(model);
      if (own !== undefined) return own;
      if (parent !== null) {
        const parents = this.byModel.get(parent);
        if (parents !== undefined) return parents;
      }
      return this.fallback;
    }
    if (this.fallback !== null) return this.fallback;
    if (this.byModel.size === 1) return this.byModel.values().next().value!;
    return null;
  }

  /** The models file's models and their tokenizers, in file order. */
  get models(): readonly ModelTokenizer[] {
    return [...this.byModel].map(([model, tokenizer]) => ({ model, tokenizer }));
  }

  /** Stops every tokenizer's chat threads. */
  async close(): Promise<void> {
    await Promise.all(this.loaded.map((t) => t.close()));
  }
}

function loadSource(
  s: { dir: string; template: string; models: readonly string[]; entry: number },
  opts: ModelTokenizersOptions,
  renderThreads: number,
  segmentCacheBytes: number,
): PromptTokenizer {
  const label = s.entry < 0 ? '--tokenizer' : `models ${s.models.join(', ')}`;
  const told = opts.onTemplateSwitchOff;
  const common = {
    renderThreads,
    segmentCacheBytes,
    ...(opts.compileTemplate === undefined ? {} : { compileTemplate: opts.compileTemplate }),
    ...(told === undefined ? {} : { onTemplateSwitchOff: (reason: string) => told(label, reason) }),
  };
  if (s.entry < 0) return PromptTokenizer.load(s.dir, s.template, common);
  const at = `models[${s.entry}]`;
  const where = `${opts.modelsFile}: ${at}`;
  try {
    return PromptTokenizer.load(s.dir, s.template, {
      ...common,
      origin: { tokenizerFlag: '--models_file', tokenizerWhere: `${where}.tokenizer: `, templateFlag: '--models_file', templateWhere: `${where}.chat_template: ` },
    });
  } catch (e) {
    // The encoder's and the template parser's own lines name the file but not the entry: prefix it.
    if (isConfigError(e) && e.path !== '--models_file') throw new ConfigError('--models_file', e.reason, `invalid --models_file: ${where}: ${e.message}`);
    throw e;
  }
}
