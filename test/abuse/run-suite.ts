import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { formatReport, missedStall, missedTargetsBesidesStall, runAttack, type AttackReport, type Scale } from './abuse-harness';
import { ATTACKS } from './attacks';

/**
 * One test per attack: runs it against a fresh server, prints its figures, and asserts the
 * targets of issue 8 (process alive, peak RSS < 300 MB, event-loop stall < 100 ms, an ordinary
 * client answered within its deadline during the attack).
 */
/** Runs after a missed stall target, each on a fresh server (see the loop below). */
const STALL_RETRIES = 2;

export function abuseSuite(scale: Scale, timeoutMs: number): void {
  describe(`abuse (${scale})`, () => {
    let redis: RedisProcess | undefined;
    const lines: string[] = [];
    beforeAll(async () => {
      if (ATTACKS.some((a) => a.needsRedis)) redis = await startStandalone();
    });
    afterAll(async () => {
      await redis?.stop();
      console.log(
        ['', `abuse (${scale}) — per attack: peak resident memory, worst event-loop stall, ordinary client, answers`, ...lines].join('\n'),
      );
    });

    // ABUSE_ONLY=<part of a name>: only the attacks whose name contains it.
    const only = process.env.ABUSE_ONLY;
    const attacks = only ? ATTACKS.filter((a) => a.name.includes(only)) : ATTACKS;
    for (const attack of attacks) {
      it(
        attack.name,
        async () => {
          const run = async (label: string): Promise<AttackReport> => {
            const report = await runAttack(attack, scale, redis?.url);
            const line = formatReport(report) + label;
            lines.push(line);
            console.log(line);
            return report;
          };
          const first = await run('');
          const missed = missedTargetsBesidesStall(first);
          let stall = missedStall(first);
          // Up to twice more, each on a fresh server: a stall the attack causes (a backtracking
          // regex, an alias flood, a huge scrape) is the same work every time and repeats in
          // every run; a loaded machine's scheduler taking a core from the busy server at the
          // wrong moment rarely does three times (a 510 KB reload beside two busy loops: 185 ms,
          // then 112 ms, against 142 ms allowed). Every other target must hold in every run.
          for (let retry = 1; retry <= STALL_RETRIES && missed.length === 0 && stall !== undefined; retry++) {
            const again = await run(`  (again, ${retry} of ${STALL_RETRIES}: the run before missed the stall target)`);
            missed.push(...missedTargetsBesidesStall(again));
            stall = missedStall(again);
          }
          expect([...missed, ...(stall === undefined ? [] : [stall])]).toEqual([]);
        },
        timeoutMs,
      );
    }
  });
}
