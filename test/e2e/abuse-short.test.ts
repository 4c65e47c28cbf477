// The short version of `npm run abuse`: every attack of issue 8, small counts, same targets.
import { abuseSuite } from '../abuse/run-suite';

abuseSuite('short', 90_000);
