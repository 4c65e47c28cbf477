// Drop-in details (dynamic metadata, header choice, counters) on a real standalone Redis; the
// same suite the memory backend passes (test/helpers/drop-in-suite.ts).
import { afterAll, beforeAll } from 'vitest';
import { startStandalone, type RedisProcess } from '../harness/redis-servers';
import { dropInSuite } from '../helpers/drop-in-suite';

let standalone: RedisProcess;
beforeAll(async () => {
  standalone = await startStandalone();
});
afterAll(async () => {
  await standalone?.stop();
});

dropInSuite('redis standalone', () => ({ REDIS_URL: standalone.url, CACHE_KEY_PREFIX: 'dropin_' }));
