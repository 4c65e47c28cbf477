// The settings page's table of the reference's variables (docs/settings.md), the list the start-up report uses
// (src/settings/reference.ts) and the variables loadSettings reads must not drift apart.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/base/paths';
import { loadSettings } from '../../src/settings/settings';
import { REFERENCE_VARIABLES, type ReferenceStatus } from '../../src/settings/reference';

const SETTINGS_PAGE = readFileSync(join(projectRoot, 'docs', 'settings.md'), 'utf8');

const STATUS_BY_TEXT: Readonly<Record<string, ReferenceStatus>> = {
  supported: 'supported',
  'accepted, no effect': 'accepted',
  'not supported': 'unsupported',
};

/** Rows of the table in `### Every variable of the reference`. */
function tableRows(): { name: string; status: ReferenceStatus | undefined; why: string }[] {
  const section = SETTINGS_PAGE.split('### Every variable of the reference')[1];
  if (section === undefined) throw new Error('docs/settings.md has no section "### Every variable of the reference"');
  const lines = section.split('\n');
  const start = lines.findIndex((l) => l.startsWith('| Variable |'));
  const rows: { name: string; status: ReferenceStatus | undefined; why: string }[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line.split('|').map((c) => c.trim());
    rows.push({ name: (cells[1] ?? '').replace(/`/g, ''), status: STATUS_BY_TEXT[cells[2] ?? ''], why: cells[3] ?? '' });
  }
  return rows;
}

/** Every variable loadSettings reads with every branch taken. */
function everyVariableRead(): Set<string> {
  const reads = new Set<string>();
  const env: Record<string, string> = {
    REDIS_URL: '127.0.0.1:6379',
    REDIS_PERSECOND: 'true',
    REDIS_PERSECOND_URL: '127.0.0.1:6380',
    GRPC_SERVER_USE_TLS: 'true',
    GRPC_SERVER_TLS_CERT: '/c.pem',
    GRPC_SERVER_TLS_KEY: '/k.pem',
    USE_DOG_STATSD: 'true',
  };
  loadSettings(
    new Proxy(env, {
      get(target, prop, receiver) {
        if (typeof prop === 'string') reads.add(prop);
        return Reflect.get(target, prop, receiver) as unknown;
      },
    }),
  );
  return reads;
}

describe('docs/settings.md: every variable of the reference', () => {
  const rows = tableRows();

  it('lists the 114 variables of src/settings/reference.ts, in its order, with the same status and reason', () => {
    expect(rows.map((r) => r.name)).toEqual(REFERENCE_VARIABLES.map((v) => v.name));
    for (const [i, v] of REFERENCE_VARIABLES.entries()) {
      expect(rows[i]?.status, v.name).toBe(v.status);
      expect(rows[i]?.why, v.name).toBe(v.why ?? '');
    }
  });

  it('documents every variable the settings code reads, in the Settings table or this one', () => {
    const settingsSection = SETTINGS_PAGE;
    for (const name of everyVariableRead()) {
      expect(
        settingsSection.includes(`\`${name}\``) || (name.startsWith('REDIS_PERSECOND_') && settingsSection.includes('`REDIS_PERSECOND_*`')),
        `${name} is read but not in docs/settings.md`,
      ).toBe(true);
    }
  });
});
