#!/usr/bin/env node
// One ShouldRateLimit call from the command line, through the project's own protos. Prints the
// answer as JSON. See USAGE.
'use strict';
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const USAGE = `usage: node scripts/rls-call.js <domain> key=value [key=value ...] [--addr host:port] [--hits N]

All key=value pairs form one descriptor; the answer is printed as JSON.

  --addr host:port  the server's gRPC address (default: GRPC_HOST:GRPC_PORT from the
                    environment, as the server reads them, else localhost:8081; a server
                    listening on all interfaces, 0.0.0.0 or ::, is called on localhost)
  --hits N          hits_addend (default 0, which the server counts as 1)
`;

/** Where the server listens when started from this environment (GRPC_HOST, GRPC_PORT). */
function addressFromEnvironment(env) {
  const host = env.GRPC_HOST && !['0.0.0.0', '::', '[::]'].includes(env.GRPC_HOST) ? env.GRPC_HOST : 'localhost';
  const port = env.GRPC_PORT || '8081';
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(USAGE);
  process.exit(0);
}
let addr = addressFromEnvironment(process.env);
let hits = 0;
const positional = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--addr') addr = args[++i];
  else if (args[i] === '--hits') hits = Number(args[++i]);
  else positional.push(args[i]);
}
const [domain, ...pairs] = positional;
if (!domain || pairs.length === 0) {
  process.stderr.write(USAGE);
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
