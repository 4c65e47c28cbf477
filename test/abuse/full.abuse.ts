// `npm run abuse`: every attack of issue 8 at full size against the built server.
import { abuseSuite } from './run-suite';

// Up to two runs per attack (see run-suite.ts), each a few minutes at most on a loaded machine.
abuseSuite('full', 480_000);
