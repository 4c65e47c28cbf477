// `floodgate check`, `explain` and `--help`: the real bin on fixture rule files, exact output
// and exit codes.
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { loadRuleDirectory } from '../../src/config/load-rule-directory';
import { projectRoot } from '../../src/base/paths';
import { FLOODGATE_BIN, runCli } from '../helpers/run-cli';
import { LIST_ERRORS } from '../helpers/list-error-messages';

const SHOP = join(projectRoot, 'test/fixtures/cli/shop');
const BROKEN = join(projectRoot, 'test/fixtures/cli/broken');
const ERRORS = join(projectRoot, 'test/fixtures/config/errors');

describe('floodgate --help', () => {
  test.each(['serve', 'check', 'explain', 'keys'])('%s --help prints its usage and exits 0', async (command) => {
    const run = await runCli([command, '--help']);
    expect(run.code).toBe(0);
    expect(run.stdout.startsWith(`usage: floodgate ${command}`)).toBe(true);
    expect(run.stderr).toBe('');
  });

  test('--help lists every command; no command is a usage error', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    for (const c of ['serve', 'check', 'explain', 'keys']) expect(help.stdout).toContain(`\n  ${c} `);
    const none = await runCli([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toBe(help.stdout);
  });

  test('an unknown command or option exits 2', async () => {
    expect((await runCli(['frobnicate'])).code).toBe(2);
    const bad = await runCli(['check', SHOP, '--nope']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.startsWith('floodgate check: unknown option --nope\n')).toBe(true);
  });
});

describe('floodgate check', () => {
  test('valid rules: one summary line per domain, exit 0', async () => {
    const run = await runCli(['check', SHOP]);
    expect(run).toEqual({
      code: 0,
      stdout:
        'search: 1 rule (1 fixed_window)\n' +
        'shop: 10 rules (5 fixed_window, 1 gcra, 1 sliding_log, 1 sliding_window, 1 token_bucket), 1 unlimited, 1 shadow, 1 replacing\n',
      stderr: '',
    });
  });

  test('the first bad file: file: message, exit 1', async () => {
    expect(await runCli(['check', BROKEN])).toEqual({ code: 1, stdout: '', stderr: "b_bad.yaml: invalid rate limit unit 'fortnight'\n" });
  });

  // Issue 21: each malformed `rate_limits` list on its own, its exact message.
  test.each(LIST_ERRORS)('refuses the malformed list %s with its exact message', async (name, message) => {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-list-'));
    try {
      copyFileSync(join(projectRoot, 'test/fixtures/config/list-errors', `${name}.yaml`), join(dir, `${name}.yaml`));
      expect(await runCli(['check', dir])).toEqual({ code: 1, stdout: '', stderr: `${name}.yaml: ${message}\n` });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a good rate_limits file: every limit counted, exit 0', async () => {
    expect(await runCli(['check', join(projectRoot, 'test/fixtures/config/lists')])).toEqual({
      code: 0,
      stdout: 'api: 4 rules (3 fixed_window, 1 token_bucket), 1 shadow, 3 in 1 rate_limits list\n',
      stderr: '',
    });
  });

  test('the same error the server reports for the reference error fixtures', async () => {
    const run = await runCli(['check', ERRORS]);
    expect(run.code).toBe(1);
    const server = await loadRuleDirectory(ERRORS, { mergeDomainConfig: false, ignoreDotFiles: false }).then(
      () => 'loaded',
      (err: Error) => err.message,
    );
    expect(server).toMatch(/^alias_bomb\.yaml: /);
    expect(run.stderr).toBe(`${server}\n`);
  });

  test('MERGE_DOMAIN_CONFIG is read as the server reads it', async () => {
    const merge = join(projectRoot, 'test/fixtures/config/merge');
    const refused = await runCli(['check', merge]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^merge_domain_key2\.yaml: duplicate domain '.+' in config file\n$/);
    const merged = await runCli(['check', merge], { MERGE_DOMAIN_CONFIG: 'true' });
    expect(merged.code).toBe(0);
    expect(merged.stdout.split('\n').filter(Boolean)).toHaveLength(1);
  });

  // Issue 19: `floodgate check config/edge.yaml` said "not a directory".
  test('a single rule file is checked as the server would load it', async () => {
    expect(await runCli(['check', join(projectRoot, 'config', 'edge.yaml')])).toEqual({
      code: 0,
      stdout: expect.stringMatching(/^edge: \d+ rules? \(/),
      stderr: '',
    });
    expect(await runCli(['check', join(BROKEN, 'b_bad.yaml')])).toEqual({
      code: 1,
      stdout: '',
      stderr: "b_bad.yaml: invalid rate limit unit 'fortnight'\n",
    });
  });

  test('a missing directory exits 1 naming it', async () => {
    expect(await runCli(['check', '/nonexistent/rules'])).toEqual({
      code: 1,
      stdout: '',
      stderr: '/nonexistent/rules: cannot read rule directory: no such directory\n',
    });
  });
});

describe('floodgate explain', () => {
  test('exact value, wildcard and key-only matches, with their keys', async () => {
    const run = await runCli(['explain', SHOP, 'shop', 'api_key=partner-42', '+', 'api_key=test-9', '+', 'tenant=t:1'], {
      CACHE_KEY_PREFIX: 'fg_',
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      [
        'descriptor 1: api_key=partner-42',
        '  api_key=partner-42: exact value (shop.api_key_partner-42)',
        '  rule shop.api_key_partner-42: 100 per 60 s (MINUTE), algorithm fixed_window',
        '  redis key: fg_rl:{shop:api_key=partner-42}:fixed_window:60:<window start, epoch s>',
        "  reference's key: fg_shop_api_key_partner-42_<window start, epoch s>",
        '  shadow mode: no',
        '  quota mode: no',
        'descriptor 2: api_key=test-9',
        "  api_key=test-9: wildcard 'test-*' (shop.api_key_test-*)",
        "  rule shop.api_key_test-* 'test_keys': 7 per 3600 s (HOUR), algorithm sliding_window",
        '  redis key: fg_rl:{shop:api_key=test-9}:sliding_window:3600',
        '  shadow mode: no',
        '  quota mode: no',
        'descriptor 3: tenant=t:1',
        '  tenant=t:1: key only, any value (shop.tenant)',
        "  rule shop.tenant 'tenant_shadow': 50 per 60 s (MINUTE), algorithm gcra, burst 50",
        '  redis key: fg_rl:{shop:tenant=t%3A1}:gcra:60',
        '  shadow mode: yes (over the limit is reported, not enforced)',
        '  quota mode: no',
        '',
      ].join('\n'),
    );
  });

  test('replaces, unlimited, no limit and no match', async () => {
    const run = await runCli([
      'explain',
      SHOP,
      'shop',
      'plan=premium',
      '+',
      'api_key=abc',
      '+',
      'internal_client=x',
      '+',
      'health_probe=1',
      '+',
      'remote_address=a',
      'path=/nope',
      '--prefix',
      'p_',
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      [
        'descriptor 1: plan=premium',
        '  plan=premium: exact value (shop.plan_premium)',
        "  rule shop.plan_premium 'premium': 1000 per 60 s (MINUTE), algorithm fixed_window",
        '  redis key: p_rl:{shop:plan=premium}:fixed_window:60:<window start, epoch s>',
        "  reference's key: p_shop_plan_premium_<window start, epoch s>",
        '  shadow mode: no',
        '  quota mode: no',
        "  replaces: 'per_api_key'",
        'descriptor 2: api_key=abc',
        '  api_key=abc: key only, any value (shop.api_key)',
        "  rule shop.api_key 'per_api_key': 10 per 60 s (MINUTE), algorithm fixed_window",
        "  replaced by 'premium': not evaluated",
        'descriptor 3: internal_client=x',
        '  internal_client=x: key only, any value (shop.internal_client)',
        '  rule shop.internal_client: unlimited',
        'descriptor 4: health_probe=1',
        '  health_probe=1: key only, any value (shop.health_probe)',
        '  no limit: the matched descriptor has no rate_limit',
        'descriptor 5: remote_address=a path=/nope',
        '  remote_address=a: key only, any value (shop.remote_address)',
        '  no rule: nothing matches path=/nope',
        '',
      ].join('\n'),
    );
  });

  // Issue 30: the key the reference would count the request in, and in the shared layout
  // (REDIS_KEY_LAYOUT=reference) the one floodgate counts in too; a share_threshold wildcard's
  // pattern stands for the value, as in the reference's cache_key.go.
  test("the reference's key, and in the shared layout the key counted in", async () => {
    const own = await runCli(['explain', SHOP, 'shop', 'static=/static/app.js', '+', 'remote_address=a', 'path=/login', '--prefix', 'p_']);
    expect(own.stdout).toContain(
      '  redis key: p_rl:{shop:static=/static/*}:fixed_window:1:<window start, epoch s>\n' +
        "  reference's key: p_shop_static_/static/*_<window start, epoch s>\n",
    );
    expect(own.stdout).toContain("  reference's key: p_shop_remote_address_a_path_/login_<window start, epoch s>\n");
    const shared = await runCli(['explain', SHOP, 'shop', 'api_key=partner-42', '+', 'api_key=test-9', '--prefix', 'p_'], {
      REDIS_KEY_LAYOUT: 'reference',
    });
    expect(shared.stdout).toContain(
      "  redis key: p_shop_api_key_partner-42_<window start, epoch s> (the reference's: REDIS_KEY_LAYOUT=reference)\n" + '  shadow mode: no\n',
    );
    // A rule the reference cannot express keeps floodgate's own key, and the reference has none.
    expect(shared.stdout).toContain('  redis key: p_rl:{shop:api_key=test-9}:sliding_window:3600\n  shadow mode: no\n');
    const json = JSON.parse((await runCli(['explain', SHOP, 'shop', 'api_key=partner-42', '--json', '--prefix', 'p_'])).stdout) as {
      descriptors: { referenceKey?: string }[];
    };
    expect(json.descriptors[0]?.referenceKey).toBe('p_shop_api_key_partner-42_');
  });

  test('quota mode, from the rule or from QUOTA_MODE, as the server applies it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-explain-quota-'));
    try {
      writeFileSync(
        join(dir, 'q.yaml'),
        'domain: q\ndescriptors:\n  - key: daily\n    quota_mode: true\n    rate_limit: { unit: day, requests_per_unit: 1000 }\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 10 }\n',
      );
      const QUOTA = '  quota mode: yes (over its limit it denies the request only when every quota-mode descriptor of the request is over)\n';
      const run = await runCli(['explain', dir, 'q', 'daily=d', '+', 'user=u']);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(`  shadow mode: no\n${QUOTA}descriptor 2: user=u\n`);
      expect(run.stdout.endsWith('  shadow mode: no\n  quota mode: no\n')).toBe(true);
      const json = JSON.parse((await runCli(['explain', dir, 'q', 'daily=d', '+', 'user=u', '--json'])).stdout) as {
        descriptors: { quotaMode?: boolean }[];
      };
      expect(json.descriptors.map((d) => d.quotaMode)).toEqual([true, false]);
      const everyRule = await runCli(['explain', dir, 'q', 'user=u'], { QUOTA_MODE: 'true' });
      expect(everyRule.stdout).toContain(QUOTA);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('SHADOW_MODE from the environment applies to every rule, as in the server', async () => {
    const run = await runCli(['explain', SHOP, 'shop', 'user=bob'], { SHADOW_MODE: 'true' });
    expect(run.stdout).toContain('  shadow mode: yes (over the limit is reported, not enforced)\n');
  });

  test('an unknown domain exits 1; bad rules exit 1 with the load error', async () => {
    expect(await runCli(['explain', SHOP, 'nope', 'a=b'])).toEqual({
      code: 1,
      stdout: '',
      stderr: `domain 'nope' is not in ${SHOP} (domains: search, shop)\n`,
    });
    expect(await runCli(['explain', BROKEN, 'broken', 'x=1'])).toEqual({
      code: 1,
      stdout: '',
      stderr: "b_bad.yaml: invalid rate limit unit 'fortnight'\n",
    });
  });
});

describe('floodgate serve', () => {
  test("is the package's bin, and what npm start runs", () => {
    const pkg = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
      scripts: Record<string, string>;
    };
    expect(pkg.bin).toEqual({ floodgate: 'bin/floodgate.js' });
    expect(pkg.scripts['start']).toMatch(/\bnode (--[\w=-]+ )*bin\/floodgate\.js serve$/);
  });

  test('runs the service (as npm start does) until SIGTERM, then exits 0', async () => {
    const proc = spawn(process.execPath, [FLOODGATE_BIN, 'serve'], {
      env: {
        PATH: process.env['PATH'] ?? '',
        RUNTIME_ROOT: projectRoot,
        HOST: '127.0.0.1',
        PORT: '0',
        GRPC_HOST: '127.0.0.1',
        GRPC_PORT: '0',
        DEBUG_PORT: '0',
        USE_PROMETHEUS: 'false',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    const exited = new Promise<string>((resolve) => proc.once('exit', (code, signal) => resolve(`exit ${code}, signal ${signal}`)));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start line: ${stderr}`)), 20_000);
        proc.stderr.on('data', (chunk: Buffer) => {
          stderr += chunk.toString();
          // SIGTERM as soon as the line is there: the handlers must already be installed.
          if (stderr.includes('floodgate: serving gRPC on 127.0.0.1:')) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      expect(stderr).toContain(`rules from ${join(projectRoot, 'config')}`);
      proc.kill('SIGTERM');
      expect(await exited).toBe('exit 0, signal null');
    } finally {
      if (proc.exitCode === null) proc.kill('SIGKILL');
    }
  });
});
