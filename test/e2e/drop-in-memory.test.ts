// Drop-in details (dynamic metadata, header choice, counters) on the memory backend; the same
// suite runs on Redis in test/integration/drop-in-redis.test.ts.
import { dropInSuite } from '../helpers/drop-in-suite';

dropInSuite('memory', () => ({}));
