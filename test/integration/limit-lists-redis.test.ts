// Issue 21 on a standalone Redis and a 3-master cluster: the list suite the memory backend runs
// (test/helpers/limit-list-suite.ts), through RedisLimiter and lua/limit_list.lua, one atomic
// call per list on the descriptor's hash tag.
import { describe } from 'vitest';
import { RedisLimiter } from '../../src/limiter/redis/redis-limiter';
import { limitListSuite } from '../helpers/limit-list-suite';
import { standaloneAndCluster } from '../helpers/standalone-and-cluster';

describe.each(standaloneAndCluster())('rate_limits lists on %s', (name, connect) => {
  let n = 0;
  const run = Date.now().toString(36);
  limitListSuite(
    { limiter: (now) => new RedisLimiter({ client: connect(), keyPrefix: `list_${name}_${run}_`, pinnedNow: now }) },
    () => `k${++n}`,
  );
});
