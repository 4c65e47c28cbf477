#!/usr/bin/env node
// In-process cost of the RLS codec, per call: proto-loader (protobufjs with the server's usual
// options) + convert.ts, against floodgate's own decoder and encoder (src/rls/), on the
// benchmark's requests and their answers. Steadier than the ghz run on a busy machine.
//   npm run build && node scripts/bench-codec.js
'use strict';
const protoLoader = require('@grpc/proto-loader');
const { SERVER_PROTO_LOADER_OPTIONS } = require('../dist/src/grpc/protos');
const { requestFromWire } = require('../dist/src/rls/convert');
const { decodeRateLimitRequest } = require('../dist/src/rls/request-decoder');
const { encodeRateLimitResponse } = require('../dist/src/rls/response-encoder');

const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', SERVER_PROTO_LOADER_OPTIONS);
const method = definition['envoy.service.ratelimit.v3.RateLimitService'].ShouldRateLimit;

// The answer in proto-loader's object form, as the server built it before its own encoder (the
// full mapping, dynamic metadata included, is test/helpers/response-to-wire.ts; these answers have
// neither headers nor metadata).
const responseToWire = (r) => ({
  overall_code: r.overallCode,
  statuses: r.statuses.map((s) => ({
    code: s.code,
    limit_remaining: s.limitRemaining,
    current_limit: { name: s.currentLimit.name ?? '', requests_per_unit: s.currentLimit.requestsPerUnit, unit: s.currentLimit.unit },
    duration_until_reset: { seconds: s.durationUntilResetSeconds, nanos: 0 },
  })),
  response_headers_to_add: [],
  request_headers_to_add: [],
});

const limit = Object.freeze({ requestsPerUnit: 1000000000, unit: 'MINUTE' });
const status = (code) => ({ code, currentLimit: limit, limitRemaining: 999999999, durationUntilResetSeconds: 42 });
const answer = (n, code = 'OK') => ({
  overallCode: code,
  statuses: Array.from({ length: n }, () => status(code)),
  responseHeadersToAdd: [],
  requestHeadersToAdd: [],
});
const entries = (pairs) => ({ entries: pairs.map(([key, value]) => ({ key, value })) });
const scenarios = {
  uniform: [
    {
      domain: 'bench',
      descriptors: [
        entries([
          ['tenant', 't1234'],
          ['path', '/a'],
        ]),
      ],
    },
    answer(1),
  ],
  multi3: [
    {
      domain: 'bench',
      descriptors: [
        entries([
          ['tenant', 't1234'],
          ['path', '/a'],
        ]),
        entries([['client', 'c1234']]),
        entries([['user', 'u1234']]),
      ],
    },
    answer(3),
  ],
  hot: [{ domain: 'bench', descriptors: [entries([['hot', 'h']])] }, answer(1, 'OVER_LIMIT')],
};

function time(label, n, f) {
  for (let i = 0; i < 20000; i++) f();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) f();
  const ns = Number(process.hrtime.bigint() - t0) / n;
  return ns;
}

const N = Number(process.env.N ?? 200000);
console.log('| scenario | proto-loader + convert ns/call | floodgate codec ns/call | saving µs/call |');
console.log('|---|---|---|---|');
for (const [name, [request, response]] of Object.entries(scenarios)) {
  const bytes = method.requestSerialize(request);
  let sink = 0;
  const before = time('before', N, () => {
    const r = requestFromWire(method.requestDeserialize(bytes));
    sink += r.descriptors.length + method.responseSerialize(responseToWire(response)).length;
  });
  const after = time('after', N, () => {
    const r = decodeRateLimitRequest(bytes);
    sink += r.descriptors.length + encodeRateLimitResponse(response).length;
  });
  if (sink === 0) throw new Error('unreachable');
  console.log(`| ${name} | ${before.toFixed(0)} | ${after.toFixed(0)} | ${((before - after) / 1000).toFixed(2)} |`);
}
