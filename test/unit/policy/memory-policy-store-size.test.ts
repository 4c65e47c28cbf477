import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect, it } from 'vitest';
import { MemoryPolicyStore } from '../../../src/policy/memory-policy-store';
import { policyParams } from '../../../src/policy/policy-model';
import { NO_INPUT } from '../../../src/policy/policy-store';
import { TRACE_POLICY, TRACE_START } from '../../helpers/policy-traces';

// Issue 18: the memory store kept each client by its whole value (100,000 clients with 4,000 B
// values: 688 MB of RSS against 244 MB without a policy). A long value is kept as a digest, as
// the memory limiter keeps long counter keys, so a client costs the same whatever it sent.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function heapMb(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 1024 / 1024;
}

/** A flat 4,000 B string, decoded from bytes as a request's value is (padEnd would share its filler). */
function value(i: number): string {
  const bytes = Buffer.alloc(4000, 'v');
  bytes.write(`${i}-`);
  return bytes.toString('latin1');
}

it('20,000 clients with 4,000 B values hold a few MB, not the values', async () => {
  const clock = { now: TRACE_START };
  const store = new MemoryPolicyStore({ now: () => clock.now });
  const params = policyParams(TRACE_POLICY);
  const before = heapMb();
  for (let i = 0; i < 20_000; i++) {
    const client = value(i);
    await store.decide(TRACE_POLICY, params, client, NO_INPUT);
  }
  const grown = heapMb() - before;
  console.log(`memory policy store: 20,000 clients of 4,000 B values hold ${grown.toFixed(1)} MB of heap`);
  expect(store.size).toBe(20_000);
  // The values alone are 80 MB (one byte per character); digests and states are some 3 MB.
  expect(grown).toBeLessThan(20);
  // Issue 26, finding 9: a client's state is numbers in a typed array (64 B, allocated with the
  // store), not an object with two Sets: at most 250 B of heap per client (was about 640 B).
  const perClient = (grown * 1024 * 1024) / 20_000;
  console.log(`memory policy store: ${perClient.toFixed(0)} B of heap per client`);
  expect(perClient).toBeLessThan(250);
  // Distinct long values stay distinct clients, and one value is one client.
  await store.decide(TRACE_POLICY, params, value(0), NO_INPUT);
  expect(store.size).toBe(20_000);
  expect((await store.lookUp(TRACE_POLICY, params, value(0))).requests).toBe(2);
  expect((await store.lookUp(TRACE_POLICY, params, value(1))).requests).toBe(1);
  await store.close();
});
