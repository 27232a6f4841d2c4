/**
 * The compiled chat template (compiled-template.ts) with the interpreter as its reference and
 * safety net. The first SHADOW_FIRST renders and then one in SHADOW_EVERY are rendered by both
 * and compared; a render the compiled form cannot do (NotCompiled) or fails is done by the
 * interpreter, whose text or error is the answer. Any difference (another text, or the compiled
 * form failing where the interpreter succeeds, or the reverse) switches the compiled form off for
 * good: every later render is interpreted, the interpreter's output is the one returned, and the
 * state shows on `/v1/status` (`template_engine`) and through `onSwitchOff` (the router logs it).
 */
import { NotCompiled } from './template-values.js';
import { commonPrefixLength } from './common-prefix.js';

export type TemplateVars = Readonly<Record<string, unknown>>;

export interface Renderer {
  render(vars: TemplateVars): string;
}

/** Renders checked against the interpreter: every one of the first SHADOW_FIRST, then one in SHADOW_EVERY. */
export const SHADOW_FIRST = 16;
export const SHADOW_EVERY = 256;

/** What `/v1/status` shows of the chat template's engine (tokenizer info `template_engine`). */
export interface TemplateEngineInfo {
  readonly engine: 'compiled' | 'interpreted';
  /** Why it is interpreted (the construct the compiler declined, or the difference found); null when compiled. */
  readonly reason: string | null;
  readonly renders: number;
  readonly shadow_checks: number;
  /** Renders the interpreter did because the compiled form does not model that case. */
  readonly interpreted_renders: number;
  /** Differences found by the shadow check (at most 1: the first switches the compiled form off). */
  readonly mismatches: number;
}

export class ShadowCheckedRenderer implements Renderer {
  private compiled: Renderer | null;
  private reason: string | null;
  private renders = 0;
  private checks = 0;
  private interpreted = 0;
  private mismatches = 0;

  constructor(
    private readonly interpreter: Renderer,
    compiled: Renderer | null,
    declined: string | null,
    /** Called once when a difference switches the compiled form off (not for a declined template). */
    private readonly onSwitchOff: (reason: string) => void = () => {},
  ) {
    this.compiled = compiled;
    this.reason = compiled === null ? (declined ?? 'not compiled') : null;
  }

  get info(): TemplateEngineInfo {
    return {
      engine: this.compiled === null ? 'interpreted' : 'compiled',
      reason: this.reason,
      renders: this.renders,
      shadow_checks: this.checks,
      interpreted_renders: this.interpreted,
      mismatches: this.mismatches,
    };
  }

  /** The compiled form off for good (a difference found here, or by another thread rendering the same template). */
  switchOff(reason: string): void {
    if (this.compiled === null) return;
    this.compiled = null;
    this.reason = reason;
    this.onSwitchOff(reason);
  }

  /** The rendered text; throws the interpreter's error when the template fails. */
  render(vars: TemplateVars): string {
    this.renders++;
    const compiled = this.compiled;
    if (compiled === null) return this.interpreter.render(vars);
    let text: string;
    try {
      text = compiled.render(vars);
    } catch (e) {
      this.interpreted++;
      const expected = this.interpreter.render(vars);
      if (!(e instanceof NotCompiled)) this.differs(`the compiled template failed (${firstLine(e)}) where the interpreter rendered`);
      return expected;
    }
    if (this.renders > SHADOW_FIRST && this.renders % SHADOW_EVERY !== 0) return text;
    this.checks++;
    let expected: string;
    try {
      expected = this.interpreter.render(vars);
    } catch (e) {
      this.differs(`the interpreter failed (${firstLine(e)}) where the compiled template rendered`);
      throw e;
    }
    if (expected !== text) this.differs(`the compiled template rendered differently from the interpreter (first difference at character ${commonPrefixLength(expected, text)})`);
    return expected;
  }

  private differs(reason: string): void {
    this.mismatches++;
    this.switchOff(reason);
  }
}

/** An error's first line: what a log field or a `/v1/route` reason carries. */
export function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n', 1)[0]!;
}
