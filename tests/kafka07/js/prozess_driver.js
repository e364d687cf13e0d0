// Drives prozess@0.7.0 against a KAFKA07 listener and prints one JSON line per result.
//   node prozess_driver.js produce HOST PORT TOPIC PARTITION MESSAGE...
//   node prozess_driver.js consume HOST PORT TOPIC PARTITION OFFSET COUNT TIMEOUT_MS
//     (OFFSET "latest" asks the broker's OFFSETS first)
// The modules come from NODE_PATH (the npm cache the tests install into).
'use strict';
require('./bignum_shim');
const prozess = require('prozess');

const [mode, host, port, topic, partition, ...rest] = process.argv.slice(2);
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const fail = (err) => { out({ error: String(err) }); process.exit(1); };

if (mode === 'produce') {
  const producer = new prozess.Producer(topic, { host, port: Number(port), partition: Number(partition) });
  producer.on('error', fail);
  producer.connect();
  producer.on('connect', () => {
    producer.send(rest, (err) => {
      if (err) fail(err);
      // no response in 0.7: the request is with the kernel, which delivers it after we exit
      out({ produced: rest.length });
      process.exit(0);
    });
  });
} else if (mode === 'consume') {
  const [offset, count, timeoutMs] = rest;
  const options = { host, port: Number(port), topic, partition: Number(partition), polling: 100 };
  if (offset !== 'latest') options.offset = offset;
  const consumer = new prozess.Consumer(options);
  const got = [];
  const deadline = Date.now() + Number(timeoutMs);
  consumer.connect((err) => {
    if (err) fail(err);
    const poll = () => {
      consumer.consume((err, messages) => {
        if (err) fail(err);
        for (const m of messages || []) {
          got.push({ payload: m.payload.toString('utf8'), compression: m.compression });
        }
        if (got.length >= Number(count) || Date.now() > deadline) {
          out({ messages: got, offset: consumer.offset.toString() });
          process.exit(0);
        }
        setTimeout(poll, 100);
      });
    };
    poll();
  });
} else {
  fail('unknown mode ' + mode);
}
