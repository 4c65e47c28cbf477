// The core service contract on the memory backend (the same suite runs on Redis in
// test/integration/redis-backend-contract.test.ts).
import { serviceContractSuite } from '../helpers/contract-suite';

serviceContractSuite('memory', () => ({}));
