/**
 * Rule-load errors quote what a file holds, and a rule file may be a symlink to anything (a
 * ConfigMap's files are links; one pointed at /proc/self/environ logged the whole environment).
 * So a quote is short and escaped: the length of the quote is the defence, not the file type.
 */
export const MAX_EXCERPT_CHARS = 40;

/** `text` with control characters escaped, cut to `max` characters with `...` after a cut. */
export function excerpt(text: string, max = MAX_EXCERPT_CHARS): string {
  const chars = Array.from(text.length > max * 2 ? text.slice(0, max * 2) : text);
  const cut = chars.length > max;
  return escapeControls(cut ? chars.slice(0, max).join('') : text) + (cut ? '...' : '');
}

/**
 * yaml.v2's own quote of a scalar in "cannot unmarshal" (decode.go `terror`): a value of more
 * than 10 bytes shows its first 7 and `...`. Escaped too.
 */
export function yamlV2Excerpt(text: string): string {
  const bytes = Buffer.from(text.length > 16 ? text.slice(0, 16) : text, 'utf8');
  if (bytes.length <= 10 && Buffer.byteLength(text) <= 10) return escapeControls(text);
  return `${escapeControls(bytes.subarray(0, 7).toString('utf8'))}...`;
}

/** Control characters (and the Unicode line separators) as escapes, so a quote stays one line. */
export function escapeControls(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f\u0085\u2028\u2029]/g, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\r') return '\\r';
    if (c === '\t') return '\\t';
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
