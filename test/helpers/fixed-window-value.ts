// lua/lib/fixed_window_step.lua keeps a fixed-window counter's count per window, as a plain
// integer in "<counter>:<window start, epoch s>" (issue 20), the key living until the window
// after it ends. These helpers find it from the counter's name.

/** Anything that sends one Redis command: a harness node (`command`) or an ioredis client (`call`). */
export type CommandSender =
  { command(...args: (string | number)[]): Promise<unknown> } | { call(...args: (string | number)[]): Promise<unknown> };

function send(node: CommandSender, ...args: (string | number)[]): Promise<unknown> {
  return 'command' in node ? node.command(...args) : node.call(...args);
}

export { fixedWindowKey } from '../../src/limiter/counter-key';

/** Of `keys`, the window keys of `counter`, latest window first. */
export function windowKeysAmong(keys: readonly string[], counter: string): string[] {
  const start = (k: string) => k.slice(counter.length + 1);
  return keys.filter((k) => k.startsWith(`${counter}:`) && /^\d+$/.test(start(k))).sort((a, b) => Number(start(b)) - Number(start(a)));
}

/** The window keys of `counter` on `node` (KEYS: tests only), latest window first. */
export async function fixedWindowKeys(node: CommandSender, counter: string): Promise<string[]> {
  const pattern = counter.replace(/[*?[\]\\]/g, '\\$&') + ':*';
  return windowKeysAmong(((await send(node, 'KEYS', pattern)) as unknown[]).map(String), counter);
}

// A window's own key, as SCAN finds it: `<prefix>rl:{...}:fixed_window:<window s>:<start s>`.
const WINDOW_KEY = /:fixed_window:\d+:\d+$/;

/**
 * The count of `counter`'s latest window on `node` (null when it has none); given a window's own
 * key (as a SCAN of the service's keys finds it), that window's count.
 */
export async function fixedWindowCount(node: CommandSender, counter: string): Promise<number | null> {
  const [latest] = WINDOW_KEY.test(counter) ? [counter] : await fixedWindowKeys(node, counter);
  if (latest === undefined) return null;
  const value = await send(node, 'GET', latest);
  if (value === null) return null;
  const text = Buffer.isBuffer(value) ? value.toString() : value;
  if (typeof text !== 'string' || !/^\d+$/.test(text)) throw new Error(`not a fixed-window count in ${latest}: ${JSON.stringify(text)}`);
  return Number(text);
}
