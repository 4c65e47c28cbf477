// `npm run abuse`: every attack of issue 8 at full size against the built server.
import { abuseSuite } from './run-suite';

abuseSuite('full', 240_000);
