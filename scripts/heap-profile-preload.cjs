// node --require scripts/heap-profile-preload.cjs: V8's sampling heap profiler from the start,
// counting the objects the GC has already collected too (the young garbage per call is the
// point, issue 29); SIGUSR2 writes the profile to $PROF_OUT. Used by scripts/bench-heap-profile.sh.
'use strict';
const { Session } = require('node:inspector');
const fs = require('node:fs');

const session = new Session();
session.connect();
session.post('HeapProfiler.enable', () => {
  session.post(
    'HeapProfiler.startSampling',
    { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true },
    (err) => {
      if (err) process.stderr.write(`heap profile: ${err.message}\n`);
    },
  );
});
process.on('SIGUSR2', () => {
  session.post('HeapProfiler.stopSampling', (err, result) => {
    if (err) process.stderr.write(`heap profile: ${err.message}\n`);
    else fs.writeFileSync(process.env.PROF_OUT, JSON.stringify(result.profile));
  });
});
