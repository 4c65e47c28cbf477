import { readFileSync } from 'node:fs';

/** Resident memory of process `pid` in MB, from /proc (Linux). */
export function residentMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for process ${pid}`);
  return Number(m[1]) / 1024;
}
