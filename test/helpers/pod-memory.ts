// The shipped pod's memory limit (deploy/kubernetes/base/deployment.yaml) and the bound issue 26
// sets from it: with the shipped defaults, no attack takes the server past 80 % of it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/base/paths';

const MIB = 1024 * 1024;

/** The memory limit of the shipped Deployment, in MiB. */
export function shippedPodLimitMib(): number {
  const text = readFileSync(join(projectRoot, 'deploy/kubernetes/base/deployment.yaml'), 'utf8');
  const m = /limits:\s*\n(?:\s+\w+:.*\n)*?\s+memory:\s*(\d+)Mi/.exec(text);
  if (!m) throw new Error('no memory limit in Mi in deploy/kubernetes/base/deployment.yaml');
  return Number(m[1]);
}

/** 80 % of the shipped pod's limit, in MiB. */
export function podMemoryBoundMib(): number {
  return 0.8 * shippedPodLimitMib();
}

export const POD_BOUND_BYTES = (): number => podMemoryBoundMib() * MIB;
