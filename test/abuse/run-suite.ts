import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { formatReport, missedTargets, runAttack, type Scale } from './abuse-harness';
import { ATTACKS } from './attacks';

/**
 * One test per attack: runs it against a fresh server, prints its figures, and asserts the
 * targets of issue 8 (process alive, peak RSS < 300 MB, event-loop stall < 100 ms, an ordinary
 * client answered within its deadline during the attack).
 */
export function abuseSuite(scale: Scale, timeoutMs: number): void {
  describe(`abuse (${scale})`, () => {
    let redis: RedisProcess | undefined;
    const lines: string[] = [];
    beforeAll(async () => {
      if (ATTACKS.some((a) => a.needsRedis)) redis = await startStandalone();
    });
    afterAll(async () => {
      await redis?.stop();
      console.log(['', `abuse (${scale}) — per attack: peak resident memory, worst event-loop stall, ordinary client, answers`, ...lines].join('\n'));
    });

    for (const attack of ATTACKS) {
      it(attack.name + (attack.fixedElsewhere ? ` [fixed on ${attack.fixedElsewhere}]` : ''), async () => {
        const report = await runAttack(attack, scale, redis?.url);
        const line = formatReport(report);
        lines.push(line);
        console.log(line);
        expect(missedTargets(report)).toEqual([]);
      }, timeoutMs);
    }
  });
}
