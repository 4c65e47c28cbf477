import { excerpt } from './quote-excerpt';
import { isAlias, isMap, isScalar, isSeq, Lexer, LineCounter, parseDocument, type Node as YamlNode, type YAMLError } from 'yaml';

/**
 * A YAML document reduced to what rule-file validation needs: maps keep their key nodes
 * (keys may be non-strings), scalars keep their source text, every node knows its line.
 *
 * The reference (Go, yaml.v2) resolves YAML 1.1 scalars (`yes`/`on` are bools, `0123` is
 * octal) but fills string fields from a scalar's source text, so `value: 0123` means the
 * string "0123". Keeping both the typed value and the text lets us do the same.
 */
export type YNode = YMap | YSeq | YScalar;

export interface YMap {
  readonly kind: 'map';
  readonly line: number;
  readonly entries: readonly { readonly key: YNode; readonly value: YNode }[];
}

export interface YSeq {
  readonly kind: 'seq';
  readonly line: number;
  readonly items: readonly YNode[];
}

export type ScalarType = 'str' | 'int' | 'float' | 'bool' | 'null';

export interface YScalar {
  readonly kind: 'scalar';
  readonly line: number;
  readonly type: ScalarType;
  /** string for str, bigint for int, number for float, boolean for bool, null for null. */
  readonly value: string | bigint | number | boolean | null;
  /** The scalar as written (quoted scalars: the unescaped string). */
  readonly text: string;
}

/** Thrown for syntax errors; the message reads like yaml.v2's (`yaml: line N: ...`). */
export class YamlSyntaxError extends Error {}

// Aliases may expand exponentially ("billion laughs") or refer to themselves; a rule file is
// small, so generous fixed bounds stop both without limiting real files.
const MAX_NODES = 200_000;
const MAX_DEPTH = 64;
/** More aliases than any hand-written rule file needs; each one is resolved in O(1). */
export const MAX_ALIASES = 1000;

/** Parses one YAML document (YAML 1.1 rules, as yaml.v2) into a {@link YNode} tree; null for an empty document. */
export function yamlTree(text: string): YNode | null {
  if (tooManyAliases(text)) throw new YamlSyntaxError(`yaml: more than ${MAX_ALIASES} aliases`);
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, {
    version: '1.1',
    intAsBigInt: true,
    uniqueKeys: sameKeyAsWritten,
    lineCounter,
    prettyErrors: false,
  });
  const first = doc.errors[0];
  if (first !== undefined) throw new YamlSyntaxError(syntaxMessage(first, lineCounter));
  if (doc.contents === null) return null;
  const state: ConvertState = { lineCounter, budget: MAX_NODES, anchors: new Map(), aliases: 0, expanding: 0 };
  return convert(doc.contents, state, 0);
}

/**
 * Counts alias tokens with the lexer alone, which stops at the first one too many: composing
 * a large document costs several times more than lexing it, and an alias flood should be
 * refused before that. (The content of a block scalar that starts with `*` counts too; the
 * exact count is kept again while converting.)
 */
function tooManyAliases(text: string): boolean {
  let aliases = 0;
  for (const token of new Lexer().lex(text)) {
    if (token.charCodeAt(0) === 42 /* '*' */ && ++aliases > MAX_ALIASES) return true;
  }
  return false;
}

/**
 * A key written twice (the same text, both plain or both quoted) in one map is refused. Keys
 * written differently that YAML 1.1 reads as one value (`yes` and `on`, `0x10` and `16`) are
 * allowed, as yaml.v2 allows them: the reference keeps top-level metadata keys as written, and
 * where it reads them as values the later one wins.
 */
function sameKeyAsWritten(a: YamlNode, b: YamlNode): boolean {
  if (a === b) return true;
  if (!isScalar(a) || !isScalar(b)) return false;
  return typeof a.value === typeof b.value && a.source === b.source;
}

interface ConvertState {
  readonly lineCounter: LineCounter;
  budget: number;
  /**
   * Anchors seen so far in document order: an alias means the latest one of its name before
   * it. Kept here because the yaml package's `Alias.resolve` searches the whole document for
   * every alias (16,000 aliases took 21.8 s).
   */
  readonly anchors: Map<string, YamlNode>;
  /** Aliases written in the document (not counting the copies an expansion makes). */
  aliases: number;
  /** > 0 while converting an alias's target: its anchors are already known, and later
   *  redefinitions of the same names must not be undone by a copy. */
  expanding: number;
}

function syntaxMessage(err: YAMLError, lineCounter: LineCounter): string {
  const line = lineCounter.linePos(err.pos[0]).line;
  // Pretty errors would append " at line L, column C:" and an excerpt; keep the reason only.
  const reason = err.message.replace(/ at line \d+, column \d+[\s\S]*$/, '');
  return `yaml: line ${line}: ${excerpt(reason, 200)}`;
}

function convert(node: YamlNode | null, state: ConvertState, depth: number): YNode {
  if (--state.budget < 0 || depth > MAX_DEPTH) {
    throw new YamlSyntaxError('yaml: document is too large or too deeply nested (check aliases)');
  }
  if (node === null) return { kind: 'scalar', line: 0, type: 'null', value: null, text: '' };
  const line = node.range ? state.lineCounter.linePos(node.range[0]).line : 0;
  if (isAlias(node)) {
    if (state.expanding === 0 && ++state.aliases > MAX_ALIASES) throw new YamlSyntaxError(`yaml: more than ${MAX_ALIASES} aliases`);
    const target = state.anchors.get(node.source);
    if (target === undefined) throw new YamlSyntaxError(`yaml: line ${line}: unknown anchor '${excerpt(node.source)}' referenced`);
    state.expanding++;
    try {
      return convert(target, state, depth + 1);
    } finally {
      state.expanding--;
    }
  }
  if (state.expanding === 0 && node.anchor) state.anchors.set(node.anchor, node);
  if (isMap(node)) {
    const entries = node.items.map((pair) => ({
      key: convert(pair.key as YamlNode | null, state, depth + 1),
      value: convert(pair.value as YamlNode | null, state, depth + 1),
    }));
    return { kind: 'map', line, entries };
  }
  if (isSeq(node)) {
    const items = node.items.map((item) => convert(item as YamlNode | null, state, depth + 1));
    return { kind: 'seq', line, items };
  }
  if (isScalar(node)) return scalar(node.value, node.source, line);
  throw new YamlSyntaxError(`yaml: line ${line}: unsupported node`);
}

function scalar(value: unknown, source: string | undefined, line: number): YScalar {
  const text = typeof value === 'string' ? value : (source ?? String(value));
  if (typeof value === 'string') return { kind: 'scalar', line, type: 'str', value, text };
  if (typeof value === 'bigint') return { kind: 'scalar', line, type: 'int', value, text };
  if (typeof value === 'number') return { kind: 'scalar', line, type: 'float', value, text };
  if (typeof value === 'boolean') return { kind: 'scalar', line, type: 'bool', value, text };
  if (value === null || value === undefined) return { kind: 'scalar', line, type: 'null', value: null, text };
  // Timestamps and other resolved types: yaml.v2 keeps them as strings in generic maps.
  return { kind: 'scalar', line, type: 'str', value: text, text };
}

/** Formats a node the way Go's `%v` prints what yaml.v2 decoded (used in error messages). */
export function goText(node: YNode): string {
  if (node.kind === 'seq') return `[${node.items.map(goText).join(' ')}]`;
  if (node.kind === 'map') {
    const parts = node.entries.map((e) => `${goText(e.key)}:${goText(e.value)}`).sort();
    return `map[${parts.join(' ')}]`;
  }
  switch (node.type) {
    case 'null':
      return '<nil>';
    case 'float':
      return goFloat(node.value as number);
    case 'str':
      return node.text;
    default:
      return String(node.value);
  }
}

/** Go's `%v` for float64 (strconv 'g', shortest): exponent form below 1e-4 and from 1e6. */
function goFloat(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (!Number.isFinite(n)) return n > 0 ? '+Inf' : '-Inf';
  if (n === 0) return '0';
  const [mantissa = '', expText = '0'] = n.toExponential().split('e');
  const exp = Number(expText);
  if (exp >= -4 && exp < 6) return String(n);
  const sign = exp < 0 ? '-' : '+';
  return `${mantissa}e${sign}${String(Math.abs(exp)).padStart(2, '0')}`;
}

/** The YAML tag yaml.v2 names in "cannot unmarshal" messages. */
export function yamlTag(node: YNode): string {
  return node.kind === 'scalar' ? `!!${node.type}` : `!!${node.kind}`;
}
