// The rule file and request the gRPC bounds tests (test/e2e/grpc-*.test.ts) share: one counter
// with a limit no test reaches, so that every answer is OK unless a bound refused the call.

export const DOMAIN_B_RULES: Record<string, string> = {
  'b.yaml': `
domain: b
descriptors:
  - key: k
    rate_limit: { unit: hour, requests_per_unit: 1000000 }
`,
};

/** RateLimitRequest for domain b, k=v, as protobuf bytes (for raw HTTP/2 clients). */
export function domainBRequest(): Buffer {
  const entry = Buffer.concat([Buffer.from([0x0a, 1]), Buffer.from('k'), Buffer.from([0x12, 1]), Buffer.from('v')]);
  const descriptor = Buffer.concat([Buffer.from([0x0a, entry.length]), entry]);
  return Buffer.concat([Buffer.from([0x0a, 1]), Buffer.from('b'), Buffer.from([0x12, descriptor.length]), descriptor]);
}
