#!/usr/bin/env node
// The benchmark's yardstick: a RateLimitService that answers OK without looking at the request,
// loaded with @grpc/proto-loader's usual options and the same server options as floodgate
// (channelz off). What floodgate costs beyond this is its own work.
//   GRPC_PORT=<port> node scripts/bench-bare-server.js
'use strict';
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [path.join(__dirname, '..', 'proto')],
});
const pkg = grpc.loadPackageDefinition(definition);
const server = new grpc.Server({ 'grpc.enable_channelz': 0 });
server.addService(pkg.envoy.service.ratelimit.v3.RateLimitService.service, {
  ShouldRateLimit(_call, callback) {
    callback(null, { overall_code: 'OK' });
  },
});
server.bindAsync(`127.0.0.1:${process.env.GRPC_PORT || 0}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stderr.write(`bare server on 127.0.0.1:${port}\n`);
});
process.once('SIGTERM', () => server.forceShutdown());
