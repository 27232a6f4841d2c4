/**
 * A chat template's syntax tree (parsed by @huggingface/jinja 0.5.11, whitespace control already
 * applied) compiled once into JavaScript closures over plain values (template-values.ts). The
 * interpreter wraps every input value in a RuntimeValue on each render and walks the tree node by
 * node; for Qwen3's template and a 66-message chat that was about 0.5 ms, most of the chat path's
 * CPU. The closures keep the interpreter's rules exactly (scopes, truthiness, operators, member
 * access, filters, tests, loop variables), listed where they are implemented.
 *
 * Any node type, filter, test or call form not modelled makes `compileTemplate` decline with a
 * reason (that template is then always interpreted). At render time a case with no plain form
 * throws NotCompiled and any template error throws: either way the caller renders with the
 * interpreter, so its text or its error message is the answer (shadow-checked-renderer.ts).
 */
import { CALL_FILTERS, callFilter, globalFunctions, member, PLAIN_FILTERS, plainFilter, TESTS, type Kwargs } from './template-builtins.js';
import { Callable, floatResult, isPlainObject, looseEquals, Namespace, NotCompiled, output, rawString, sliceOf, truthy, TUPLES } from './template-values.js';

/** The syntax-tree node shape this compiler reads (the package does not export its AST types). */
interface Node {
  readonly type: string;
  readonly [field: string]: unknown;
}

/** The template uses something the compiler does not model. */
export class TemplateDeclined extends Error {}

class Scope {
  readonly vars = new Map<string, unknown>();
  constructor(readonly parent: Scope | null) {}

  /** Environment.lookupVariable: the nearest scope holding the name (a name set to undefined counts). */
  lookup(name: string): unknown {
    for (let s: Scope | null = this; s !== null; s = s.parent) {
      const v = s.vars.get(name);
      if (v !== undefined || s.vars.has(name)) return v;
    }
    return undefined;
  }
}

type Expr = (scope: Scope) => unknown;
type Block = (scope: Scope) => string;

/** Thrown by `{% break %}` / `{% continue %}`; caught by the nearest loop. */
const BREAK = new Error('break');
const CONTINUE = new Error('continue');

/** Names the interpreter declares before the template's variables (setupGlobals, Environment). */
const GLOBAL_CONSTANTS: readonly (readonly [string, unknown])[] = [
  ['false', false],
  ['true', true],
  ['none', null],
  ['True', true],
  ['False', false],
  ['None', null],
];
/** Declared by the interpreter, not modelled here (the date would also make the shadow check flaky): reaching it is interpreted. */
const UNMODELLED_GLOBALS = new Set(['strftime_now']);
const GLOBAL_FUNCTIONS = globalFunctions();
const GLOBAL_NAMES = new Set(['namespace', 'raise_exception', 'range', 'strftime_now', ...GLOBAL_CONSTANTS.map(([n]) => n)]);

export class CompiledTemplate {
  private constructor(private readonly program: Block) {}

  /** Compiles `parsed` (Template.parsed); throws TemplateDeclined naming the first unsupported construct. */
  static compile(parsed: unknown): CompiledTemplate {
    return new CompiledTemplate(block(((parsed as Node)['body'] ?? []) as Node[]));
  }

  /** The rendered text; throws NotCompiled or any Error when the interpreter must render instead. */
  render(vars: Readonly<Record<string, unknown>>): string {
    const global = new Scope(null);
    for (const [k, v] of GLOBAL_CONSTANTS) global.vars.set(k, v);
    for (const [k, v] of GLOBAL_FUNCTIONS) global.vars.set(k, v);
    for (const k of Object.keys(vars)) {
      // The interpreter refuses to declare a variable twice (`Variable already declared`).
      if (GLOBAL_NAMES.has(k) || typeof vars[k] === 'function') throw new NotCompiled(`variable ${k}`);
      global.vars.set(k, vars[k]);
    }
    // Run in the global scope itself, as the interpreter does (a top-level set lands there).
    return this.program(global);
  }
}

function decline(what: string): never {
  throw new TemplateDeclined(what);
}

/**
 * A filter, test or global the compiled form does not model: the template still compiles, and a
 * render that reaches it is done by the interpreter. (Declining the whole template would cost
 * every render for a branch most never take, e.g. Llama 3.1's `builtin_tools | reject(...)`.)
 */
function unmodelled(what: string): (scope: Scope) => never {
  return () => {
    throw new NotCompiled(what);
  };
}

function block(nodes: readonly Node[]): Block {
  const parts = nodes.map(statement);
  if (parts.length === 0) return () => '';
  if (parts.length === 1) return parts[0]!;
  return (s) => {
    let out = '';
    for (let i = 0; i < parts.length; i++) out += parts[i]!(s);
    return out;
  };
}

function statement(node: Node): Block {
  switch (node.type) {
    case 'StringLiteral': {
      const text = node['value'] as string;
      return () => text;
    }
    case 'Comment':
      return () => '';
    case 'If':
      return ifStatement(node);
    case 'For':
      return forStatement(node);
    case 'Set':
      return setStatement(node);
    case 'Break':
      return () => {
        throw BREAK;
      };
    case 'Continue':
      return () => {
        throw CONTINUE;
      };
    default: {
      const e = expression(node);
      return (s) => output(e(s));
    }
  }
}

function ifStatement(node: Node): Block {
  const test = expression(node['test'] as Node);
  const body = block(node['body'] as Node[]);
  const alternate = block(node['alternate'] as Node[]);
  return (s) => (truthy(test(s)) ? body(s) : alternate(s));
}

type Binder = (scope: Scope, item: unknown) => void;

function loopBinder(loopvar: Node): Binder {
  if (loopvar.type === 'Identifier') {
    const name = loopvar['value'] as string;
    return (scope, item) => scope.vars.set(name, item);
  }
  const names = (loopvar['value'] as Node[]).map((n) => (n.type === 'Identifier' ? (n['value'] as string) : decline(`loop variable ${n.type}`)));
  return (scope, item) => {
    if (!Array.isArray(item) || TUPLES.has(item)) throw new Error('Cannot unpack non-iterable type');
    if (item.length !== names.length) throw new Error('Wrong number of items to unpack');
    for (let j = 0; j < names.length; j++) scope.vars.set(names[j]!, item[j]);
  };
}

/** Does the subtree name `loop`? (The interpreter builds the loop object every iteration; unused, it is skipped.) */
function mentions(node: unknown, name: string): boolean {
  if (Array.isArray(node)) return node.some((n) => mentions(n, name));
  if (node instanceof Map) return Array.from(node).some(([k, v]) => mentions(k, name) || mentions(v, name));
  if (typeof node !== 'object' || node === null) return false;
  const n = node as Node;
  if (n.type === 'Identifier' && n['value'] === name) return true;
  return Object.values(n).some((v) => typeof v === 'object' && mentions(v, name));
}

/** evaluateFor: one scope for the whole loop, `loop` and the loop variables set in it per item, for-else. */
function forStatement(node: Node): Block {
  const iterableNode = node['iterable'] as Node;
  const selected = iterableNode.type === 'SelectExpression';
  const iterable = expression(selected ? (iterableNode['lhs'] as Node) : iterableNode);
  const filter = selected ? expression(iterableNode['test'] as Node) : null;
  const bind = loopBinder(node['loopvar'] as Node);
  const body = block(node['body'] as Node[]);
  const elseBody = block((node['defaultBlock'] ?? []) as Node[]);
  const wantsLoop = mentions(node['body'], 'loop') || mentions(node['defaultBlock'], 'loop');
  return (s) => {
    const scope = new Scope(s);
    const source = iterable(scope);
    let items: readonly unknown[];
    if (Array.isArray(source)) items = source;
    else if (isPlainObject(source)) items = Object.keys(source);
    else throw new Error('Expected iterable or object type in for loop');
    if (filter !== null) {
      const kept: unknown[] = [];
      for (const item of items) {
        const itemScope = new Scope(scope);
        bind(itemScope, item);
        if (truthy(filter(itemScope))) kept.push(item);
      }
      items = kept;
    }
    let out = '';
    let noIteration = true;
    const n = items.length;
    for (let i = 0; i < n; i++) {
      if (wantsLoop) {
        scope.vars.set('loop', {
          index: i + 1,
          index0: i,
          revindex: n - i,
          revindex0: n - i - 1,
          first: i === 0,
          last: i === n - 1,
          length: n,
          previtem: i > 0 ? items[i - 1] : undefined,
          nextitem: i < n - 1 ? items[i + 1] : undefined,
        });
      }
      bind(scope, items[i]);
      try {
        out += body(scope);
      } catch (e) {
        if (e === CONTINUE) continue;
        if (e === BREAK) break;
        throw e;
      }
      noIteration = false;
    }
    if (noIteration) out += elseBody(scope);
    return out;
  };
}

/** evaluateSet: a name in the current scope, a tuple of names, or a namespace attribute. */
function setStatement(node: Node): Block {
  const value = node['value'] === null || node['value'] === undefined ? block(node['body'] as Node[]) : expression(node['value'] as Node);
  const assignee = node['assignee'] as Node;
  if (assignee.type === 'Identifier') {
    const name = assignee['value'] as string;
    return (s) => {
      s.vars.set(name, value(s));
      return '';
    };
  }
  if (assignee.type === 'TupleLiteral') {
    const names = (assignee['value'] as Node[]).map((n) => (n.type === 'Identifier' ? (n['value'] as string) : decline(`set target ${n.type}`)));
    return (s) => {
      const rhs = value(s);
      if (!Array.isArray(rhs) || rhs.length !== names.length) throw new Error('Cannot unpack in set');
      for (let i = 0; i < names.length; i++) s.vars.set(names[i]!, rhs[i]);
      return '';
    };
  }
  if (assignee.type === 'MemberExpression' && (assignee['property'] as Node).type === 'Identifier' && assignee['computed'] !== true) {
    const object = expression(assignee['object'] as Node);
    const prop = (assignee['property'] as Node)['value'] as string;
    return (s) => {
      const rhs = value(s);
      const ns = object(s);
      if (!(ns instanceof Namespace)) throw new Error('cannot assign attribute on non-namespace object');
      ns.entries.set(prop, rhs);
      return '';
    };
  }
  return decline(`set target ${assignee.type}`);
}

function expression(node: Node): Expr {
  switch (node.type) {
    case 'StringLiteral':
    case 'IntegerLiteral': {
      const v = node['value'];
      return () => v;
    }
    case 'FloatLiteral': {
      const v = node['value'] as number;
      if (Number.isInteger(v)) decline('integral float literal');
      return () => v;
    }
    case 'ArrayLiteral': {
      const items = (node['value'] as Node[]).map(expression);
      return (s) => evaluateAll(items, s);
    }
    case 'TupleLiteral': {
      const items = (node['value'] as Node[]).map(expression);
      return (s) => {
        const t = evaluateAll(items, s);
        TUPLES.add(t);
        return t;
      };
    }
    case 'ObjectLiteral':
      return objectLiteral(node);
    case 'Identifier': {
      const name = node['value'] as string;
      if (UNMODELLED_GLOBALS.has(name)) return unmodelled(`global ${name}`);
      return (s) => s.lookup(name);
    }
    case 'MemberExpression':
      return memberExpression(node);
    case 'CallExpression':
      return callExpression(node);
    case 'UnaryExpression':
      return unary(node);
    case 'BinaryExpression':
      return binary(node);
    case 'FilterExpression':
      return filterExpression(node);
    case 'TestExpression': {
      const testNode = node['test'] as Node;
      const operand = expression(node['operand'] as Node);
      const negate = node['negate'] === true;
      if (testNode['value'] === 'iterable') return (s) => iterableTest(operand(s)) !== negate;
      const test = TESTS.get(testNode['value'] as string);
      if (test === undefined) return unmodelled(`test ${String(testNode['value'])}`);
      return (s) => test(operand(s)) !== negate;
    }
    case 'SelectExpression': {
      const test = expression(node['test'] as Node);
      const lhs = expression(node['lhs'] as Node);
      return (s) => (truthy(test(s)) ? lhs(s) : undefined);
    }
    case 'Ternary': {
      const cond = expression(node['condition'] as Node);
      const a = expression(node['trueExpr'] as Node);
      const b = expression(node['falseExpr'] as Node);
      return (s) => (truthy(cond(s)) ? a(s) : b(s));
    }
    default:
      return decline(`${node.type} node`);
  }
}

/** `is iterable`: a list (not a tuple) or a string. */
function iterableTest(v: unknown): boolean {
  return (Array.isArray(v) && !TUPLES.has(v)) || typeof v === 'string';
}

/** Keys an object literal may have: one whose JavaScript order or meaning would differ from a Map's is left to the interpreter. */
function plainKey(k: string): string {
  if (k === '__proto__' || /^(?:0|[1-9]\d*)$/.test(k)) throw new NotCompiled(`object key ${k}`);
  return k;
}

function objectLiteral(node: Node): Expr {
  const entries = Array.from((node['value'] as Map<Node, Node>).entries()).map(([k, v]) => [expression(k), expression(v)] as const);
  return (s) => {
    const o: Record<string, unknown> = {};
    for (const [k, v] of entries) {
      const key = k(s);
      if (typeof key !== 'string') throw new Error('Object keys must be strings');
      o[plainKey(key)] = v(s);
    }
    return o;
  };
}

function optionalInt(v: unknown): number | undefined {
  if (v === undefined || (typeof v === 'number' && Number.isInteger(v))) return v;
  throw new Error('Slice indices must be integers or undefined');
}

function memberExpression(node: Node): Expr {
  const object = expression(node['object'] as Node);
  const prop = node['property'] as Node;
  if (node['computed'] === true && prop.type === 'SliceExpression') {
    const part = (k: string): Expr => (prop[k] === undefined ? () => undefined : expression(prop[k] as Node));
    const [start, stop, step] = [part('start'), part('stop'), part('step')];
    return (s) => {
      const o = object(s);
      if (!(Array.isArray(o) || typeof o === 'string')) throw new Error('Slice object must be an array or string');
      const a = optionalInt(start(s));
      const b = optionalInt(stop(s));
      const c = optionalInt(step(s));
      // Strings slice by code point (Array.from), as the interpreter does.
      return Array.isArray(o) ? sliceOf(o, a, b, c) : sliceOf(Array.from(o), a, b, c).join('');
    };
  }
  if (node['computed'] === true) {
    const key = expression(prop);
    return (s) => member(object(s), key(s));
  }
  const name = prop['value'];
  return (s) => member(object(s), name);
}

interface Arguments {
  readonly positional: readonly Expr[];
  readonly keywords: readonly (readonly [string, Expr])[];
}

function argumentList(args: readonly Node[]): Arguments {
  const positional: Expr[] = [];
  const keywords: [string, Expr][] = [];
  for (const a of args) {
    if (a.type === 'KeywordArgumentExpression') keywords.push([(a['key'] as Node)['value'] as string, expression(a['value'] as Node)]);
    else if (a.type === 'SpreadExpression' || a.type === 'KeywordSpreadExpression') decline('argument unpacking');
    else positional.push(expression(a));
  }
  return { positional, keywords };
}

/**
 * Each expression's value, in order. Loops rather than `map` with an arrow: render-time closures
 * cost a property definition each under tsx (esbuild's keepNames), which the tests and benchmarks use.
 */
function evaluateAll(exprs: readonly Expr[], s: Scope): unknown[] {
  const out = new Array<unknown>(exprs.length);
  for (let i = 0; i < exprs.length; i++) out[i] = exprs[i]!(s);
  return out;
}

function evaluateKwargs(keywords: Arguments['keywords'], s: Scope): Map<string, unknown> {
  const kwargs = new Map<string, unknown>();
  for (const [k, e] of keywords) {
    if (kwargs.has(k)) throw new Error(`Got multiple values for keyword argument '${k}'`);
    kwargs.set(k, e(s));
  }
  return kwargs;
}

function callExpression(node: Node): Expr {
  const { positional, keywords } = argumentList(node['args'] as Node[]);
  const callee = expression(node['callee'] as Node);
  return (s) => {
    const args = evaluateAll(positional, s);
    const kwargs: Kwargs = keywords.length === 0 ? null : evaluateKwargs(keywords, s);
    const fn = callee(s);
    if (!(fn instanceof Callable)) throw new Error('Cannot call something that is not a function');
    return fn.call(args, kwargs);
  };
}

function filterExpression(node: Node): Expr {
  const operand = expression(node['operand'] as Node);
  const f = node['filter'] as Node;
  if (f.type === 'Identifier') {
    const name = f['value'] as string;
    if (!PLAIN_FILTERS.has(name)) return unmodelled(`filter ${name}`);
    return (s) => plainFilter(name, operand(s));
  }
  const calleeNode = f['callee'] as Node;
  const name = calleeNode.type === 'Identifier' ? (calleeNode['value'] as string) : decline('filter call');
  if (!CALL_FILTERS.has(name)) return unmodelled(`filter ${name}(...)`);
  // The interpreter requires string literals here and errors otherwise.
  if ((name === 'selectattr' || name === 'rejectattr') && (f['args'] as Node[]).some((a) => a.type !== 'StringLiteral')) return unmodelled(`${name} arguments`);
  const { positional, keywords } = argumentList(f['args'] as Node[]);
  return (s) => {
    const v = operand(s);
    return callFilter(name, v, evaluateAll(positional, s), evaluateKwargs(keywords, s));
  };
}

function numeric(v: unknown): number | null {
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return v ? 1 : 0;
  return null;
}

function unary(node: Node): Expr {
  const arg = expression(node['argument'] as Node);
  const op = (node['operator'] as { value: string }).value;
  if (op === 'not') return (s) => !truthy(arg(s));
  if (op !== '-' && op !== '+') return decline(`unary ${op}`);
  const sign = op === '-' ? -1 : 1;
  return (s) => {
    const n = numeric(arg(s));
    if (n === null) throw new Error(`Unknown operator "${op}"`);
    return sign * n;
  };
}

const ARITHMETIC = new Set(['+', '-', '*', '/', '//', '%', '**']);
const COMPARISON = new Set(['<', '>', '<=', '>=']);
const MEMBERSHIP = new Set(['in', 'not in']);

function binary(node: Node): Expr {
  const op = (node['operator'] as { value: string }).value;
  const left = expression(node['left'] as Node);
  const right = expression(node['right'] as Node);
  switch (op) {
    case 'and':
      return (s) => {
        const l = left(s);
        return truthy(l) ? right(s) : l;
      };
    case 'or':
      return (s) => {
        const l = left(s);
        return truthy(l) ? l : right(s);
      };
    case '==':
      return (s) => {
        const l = left(s);
        const r = right(s);
        // Two strings (`message.role == 'user'`, the common case) compare as looseEquals would.
        return typeof l === 'string' && typeof r === 'string' ? l === r : looseEquals(l, r);
      };
    case '!=':
      return (s) => {
        const l = left(s);
        const r = right(s);
        return typeof l === 'string' && typeof r === 'string' ? l !== r : !looseEquals(l, r);
      };
    case '+':
    case '~':
      return (s) => {
        const l = left(s);
        const r = right(s);
        // String concatenation, most of a chat template's work: what `operate` gives two strings.
        return typeof l === 'string' && typeof r === 'string' ? l + r : operate(op, l, r);
      };
  }
  if (!(ARITHMETIC.has(op) || COMPARISON.has(op) || MEMBERSHIP.has(op))) return decline(`operator ${op}`);
  return (s) => operate(op, left(s), right(s));
}

/** evaluateBinaryExpression after and/or/==/!=, its branches in its order. */
function operate(op: string, l: unknown, r: unknown): unknown {
  if (l === undefined || r === undefined) {
    if (r === undefined && MEMBERSHIP.has(op)) return op === 'not in';
    throw new Error(`Cannot perform operation ${op} on undefined values`);
  }
  if (l === null || r === null) throw new Error('Cannot perform operation on null values');
  if (op === '~') return rawString(l) + rawString(r);
  if (op === '**') {
    const a = numeric(l);
    const b = numeric(r);
    if (a !== null && b !== null) return power(a, b);
  }
  if (typeof l === 'number' && typeof r === 'number') return arithmetic(op, l, r);
  if (Array.isArray(l) && Array.isArray(r)) {
    if (op === '+') return l.concat(r);
  } else if (Array.isArray(r)) {
    if (MEMBERSHIP.has(op)) return contains(r, l) === (op === 'in');
  }
  if ((typeof l === 'string' || typeof r === 'string') && op === '+') return rawString(l) + rawString(r);
  if (typeof l === 'string' && typeof r === 'string' && MEMBERSHIP.has(op)) return r.includes(l) === (op === 'in');
  if (typeof l === 'string' && isPlainObject(r) && MEMBERSHIP.has(op)) return Object.hasOwn(r, l) === (op === 'in');
  throw new Error(`Unknown operator "${op}"`);
}

/** `x in list`: the interpreter's `find(x => x.value === left.value)` on raw values. */
function contains(list: readonly unknown[], v: unknown): boolean {
  if (v instanceof Callable) throw new NotCompiled('membership of a function');
  for (const x of list) {
    if (x instanceof Callable) throw new NotCompiled('membership of a function');
    if (x === v) return true;
  }
  return false;
}

function power(a: number, b: number): number {
  if (a === 0 && b < 0) throw new Error('0.0 cannot be raised to a negative power');
  const result = a ** b;
  if (!Number.isFinite(result)) throw new Error('Exponentiation result is not a finite real number');
  return !Number.isInteger(a) || !Number.isInteger(b) || b < 0 ? floatResult(result) : result;
}

function typed(n: number, isFloat: boolean): number {
  return isFloat ? floatResult(n) : n;
}

/** Number op number: float when either side is (a non-integral number), an integral float left to the interpreter. */
function arithmetic(op: string, a: number, b: number): unknown {
  const isFloat = !Number.isInteger(a) || !Number.isInteger(b);
  switch (op) {
    case '+':
      return typed(a + b, isFloat);
    case '-':
      return typed(a - b, isFloat);
    case '*':
      return typed(a * b, isFloat);
    case '/':
      return floatResult(a / b);
    case '//':
      return typed(Math.floor(a / b), isFloat);
    case '%':
      return typed(a % b, isFloat);
    case '<':
      return a < b;
    case '>':
      return a > b;
    case '>=':
      return a >= b;
    case '<=':
      return a <= b;
  }
  throw new Error(`Unknown operator "${op}"`);
}
