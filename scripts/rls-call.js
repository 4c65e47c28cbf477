#!/usr/bin/env node
// One ShouldRateLimit call from the command line, through the project's own protos:
//   node scripts/rls-call.js <domain> key=value [key=value ...] [--addr host:port] [--hits N]
// All key=value pairs form one descriptor. Prints the answer as JSON.
'use strict';
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const args = process.argv.slice(2);
let addr = 'localhost:8081';
let hits = 0;
const positional = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--addr') addr = args[++i];
  else if (args[i] === '--hits') hits = Number(args[++i]);
  else positional.push(args[i]);
}
const [domain, ...pairs] = positional;
if (!domain || pairs.length === 0) {
  console.error('usage: node scripts/rls-call.js <domain> key=value [key=value ...] [--addr host:port] [--hits N]');
  process.exit(2);
}
const entries = pairs.map((p) => {
  const eq = p.indexOf('=');
  return eq < 0 ? { key: p, value: '' } : { key: p.slice(0, eq), value: p.slice(eq + 1) };
});
const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
  keepCase: false,
  longs: Number,
  enums: String,
  includeDirs: [path.join(__dirname, '..', 'proto')],
});
const { RateLimitService } = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3;
const client = new RateLimitService(addr, grpc.credentials.createInsecure());
client.ShouldRateLimit({ domain, descriptors: [{ entries }], hitsAddend: hits }, { deadline: Date.now() + 5000 }, (err, res) => {
  client.close();
  if (err) {
    console.error(`error: ${grpc.status[err.code]}: ${err.details}`);
    process.exit(1);
  }
  console.log(JSON.stringify(res, null, 2));
});
