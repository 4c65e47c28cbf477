import { yamlV2Excerpt } from './quote-excerpt';
import { UINT32_MAX } from '../domain/uint32';
import { goText, yamlTag, type YMap, type YNode } from './yaml-tree';

/**
 * Typed access to the fields of a validated YAML tree. Like yaml.v2 decoding into Go structs,
 * it does not stop at the first wrong type: it records every one (`line N: cannot unmarshal
 * !!str `abc` into uint32`) and the caller reports them together.
 */
export class DecodeYamlFields {
  private readonly errors: { readonly line: number; readonly text: string }[] = [];

  /** The map's entries by key; keys are known to be strings after key validation. */
  fields(map: YMap): Map<string, YNode> {
    const out = new Map<string, YNode>();
    for (const { key, value } of map.entries) out.set(goText(key), value);
    return out;
  }

  /** yaml.v2 fills a string field from any scalar's source text (`value: 0123` is "0123"). */
  string(node: YNode | undefined): string {
    if (node === undefined) return '';
    if (node.kind !== 'scalar') return this.fail(node, 'string', '');
    return node.type === 'null' ? '' : node.text;
  }

  bool(node: YNode | undefined): boolean {
    if (node === undefined || isNull(node)) return false;
    if (node.kind === 'scalar' && node.type === 'bool') return node.value as boolean;
    return this.fail(node, 'bool', false);
  }

  /** An unsigned 32-bit integer (what the reference's `requests_per_unit` is); undefined when absent. */
  uint32(node: YNode | undefined): number | undefined {
    if (node === undefined || isNull(node)) return undefined;
    if (node.kind === 'scalar' && node.type === 'int') {
      const value = node.value as bigint;
      if (value >= 0n && value <= BigInt(UINT32_MAX)) return Number(value);
    }
    return this.fail(node, 'uint32', undefined);
  }

  /** A list; null or absent is an empty list. */
  list(node: YNode | undefined, target: string): readonly YNode[] {
    if (node === undefined || isNull(node)) return [];
    if (node.kind === 'seq') return node.items;
    return this.fail(node, target, []);
  }

  /** A map; null or absent is undefined (yaml.v2 leaves a nil pointer). */
  map(node: YNode | undefined, target: string): YMap | undefined {
    if (node === undefined || isNull(node)) return undefined;
    if (node.kind === 'map') return node;
    return this.fail(node, target, undefined);
  }

  /** The accumulated errors in yaml.v2's wording, or undefined when there were none. */
  message(): string | undefined {
    if (this.errors.length === 0) return undefined;
    // yaml.v2 decodes in document order; fields here are read in a fixed order, so sort (stable).
    const lines = [...this.errors].sort((a, b) => a.line - b.line).map((e) => e.text);
    return `yaml: unmarshal errors:\n  ${lines.join('\n  ')}`;
  }

  private fail<T>(node: YNode, target: string, fallback: T): T {
    this.errors.push({ line: node.line, text: cannotUnmarshal(node, target) });
    return fallback;
  }
}

/** yaml.v2's text for a value of the wrong type. */
export function cannotUnmarshal(node: YNode, target: string): string {
  const shown = node.kind === 'scalar' ? ` \`${yamlV2Excerpt(goText(node))}\`` : '';
  return `line ${node.line}: cannot unmarshal ${yamlTag(node)}${shown} into ${target}`;
}

function isNull(node: YNode): boolean {
  return node.kind === 'scalar' && node.type === 'null';
}
