/** Where a command writes; tests and the bin pass the process streams. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

/** Exit codes of every command: 0 fine, 1 the thing checked is wrong, 2 the command line or setup is. */
export const EXIT_OK = 0;
export const EXIT_FINDINGS = 1;
export const EXIT_USAGE = 2;

/** Thrown for a bad command line; the dispatcher prints it with the command's usage. */
export class UsageError extends Error {}

/** `--name value` and `--flag` options, and positional arguments, in order. */
export interface ParsedArgs {
  readonly positional: string[];
  readonly options: Map<string, string | true>;
}

/**
 * Splits arguments. `valued` names the options that take a value (`--x v` or `--x=v`); any
 * other `--x` is a flag. An option not in `valued` or `flags` is a usage error.
 */
export function parseArgs(args: readonly string[], valued: readonly string[], flags: readonly string[]): ParsedArgs {
  const positional: string[] = [];
  const options = new Map<string, string | true>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('--') || arg === '--') {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    if (valued.includes(name)) {
      const value = eq >= 0 ? arg.slice(eq + 1) : args[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
      options.set(name, value);
    } else if (flags.includes(name) && eq < 0) {
      options.set(name, true);
    } else {
      throw new UsageError(`unknown option ${arg}`);
    }
  }
  return { positional, options };
}

/** An integer option within bounds. */
export function intOption(args: ParsedArgs, name: string, fallback: number, min: number, max: number): number {
  const v = args.options.get(name);
  if (v === undefined) return fallback;
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!(n >= min && n <= max)) throw new UsageError(`--${name} must be an integer from ${min} to ${max}`);
  return n;
}

export function stringOption(args: ParsedArgs, name: string): string | undefined {
  const v = args.options.get(name);
  return typeof v === 'string' ? v : undefined;
}
