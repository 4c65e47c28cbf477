import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, SettingsError } from '../base/errors';
import { projectRoot } from '../base/paths';
import { CHECK_USAGE, checkCommand } from './check-command';
import { EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UsageError, type CliIo } from './cli-io';
import { EXPLAIN_USAGE, explainCommand } from './explain-command';
import { KEYS_USAGE, keysCommand } from './keys-command';

const SERVE_USAGE = `usage: floodgate serve

Runs the rate-limit service (what 'npm start' runs). Every setting comes from the environment;
see docs/settings.md.
`;

export const MAIN_USAGE = `usage: floodgate <command> [arguments]

commands:
  serve                          run the service (settings from the environment)
  check <dir>                    validate rule files exactly as the server loads them
  explain <dir> <domain> k=v...  which rule a descriptor matches, and why
  keys --redis <url> [--fix]     find counter keys without a TTL or of unknown shape

'floodgate <command> --help' describes one command; 'floodgate --version' prints the version.
`;

interface Command {
  readonly usage: string;
  readonly run: (args: readonly string[], io: CliIo) => Promise<number | undefined>;
}

const COMMANDS: Readonly<Record<string, Command>> = {
  serve: {
    usage: SERVE_USAGE,
    run: async (args) => {
      if (args.length > 0) throw new UsageError(`serve takes no arguments (settings come from the environment)`);
      // Importing main starts the service; it owns the process from here on (signals, exit).
      await import('../main.js');
      return undefined;
    },
  },
  check: { usage: CHECK_USAGE, run: checkCommand },
  explain: { usage: EXPLAIN_USAGE, run: explainCommand },
  keys: { usage: KEYS_USAGE, run: keysCommand },
};

const PROCESS_IO: CliIo = { out: (t) => void process.stdout.write(t), err: (t) => void process.stderr.write(t) };

/** Runs one command line; resolves to the exit code, or undefined when the service now runs. */
export async function runCli(argv: readonly string[], io: CliIo = PROCESS_IO): Promise<number | undefined> {
  const [name, ...args] = argv;
  if (name === '--version' || name === '-v') {
    io.out(`floodgate ${packageVersion()}\n`);
    return EXIT_OK;
  }
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') return mainHelp(name, args, io);
  const command = COMMANDS[name];
  if (command === undefined) {
    io.err(`floodgate: unknown command '${name}'\n\n${MAIN_USAGE}`);
    return EXIT_USAGE;
  }
  if (args.includes('--help') || args.includes('-h')) {
    io.out(command.usage);
    return EXIT_OK;
  }
  try {
    return await command.run(args, io);
  } catch (err) {
    return exitCodeFor(err, name, command.usage, io);
  }
}

/** package.json's version: the release's, the image's and the chart's appVersion (the release test keeps them equal). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;
}

/** `floodgate`, `floodgate --help`, `floodgate help [command]`. */
function mainHelp(name: string | undefined, args: readonly string[], io: CliIo): number {
  if (name === undefined) {
    io.err(MAIN_USAGE);
    return EXIT_USAGE;
  }
  const topic = name === 'help' && args[0] !== undefined ? COMMANDS[args[0]] : undefined;
  io.out(topic?.usage ?? MAIN_USAGE);
  return EXIT_OK;
}

/** A command's error as its message and exit code; anything unexpected is rethrown. */
function exitCodeFor(err: unknown, name: string, usage: string, io: CliIo): number {
  if (err instanceof UsageError) {
    io.err(`floodgate ${name}: ${err.message}\n\n${usage}`);
    return EXIT_USAGE;
  }
  if (err instanceof SettingsError) {
    io.err(`floodgate ${name}: ${err.message}\n`);
    return EXIT_USAGE;
  }
  if (err instanceof ConfigError) {
    io.err(`${err.message}\n`);
    return EXIT_FINDINGS;
  }
  throw err;
}
