// Drives kafka@0.2.3 (node-kafka, a Kafka 0.6-era client: it writes and reads magic-0 messages only) against
// a KAFKA07 listener serving magic 0, and prints one JSON line per result.
//   node node_kafka_driver.js produce HOST PORT TOPIC PARTITION MESSAGE...
//   node node_kafka_driver.js consume HOST PORT TOPIC PARTITION OFFSET COUNT TIMEOUT_MS
// The modules come from NODE_PATH (the npm cache the tests install into).
'use strict';
const kafka = require('kafka');

const [mode, host, port, topic, partition, ...rest] = process.argv.slice(2);
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const fail = (err, text) => { out({ error: String(err), text: text || null }); process.exit(1); };

if (mode === 'produce') {
  const producer = new kafka.Producer({ host, port: Number(port), topic, partition: Number(partition) });
  producer.on('error', fail);
  producer.connect(() => {
    producer.send(rest);
    out({ produced: rest.length });
    // no response in 0.7: end the connection once the request is written
    producer._connection.end(() => process.exit(0));
  });
} else if (mode === 'consume') {
  const [offset, count, timeoutMs] = rest;
  const consumer = new kafka.Consumer({ host, port: Number(port), pollInterval: 100 });
  const got = [];
  let last = Number(offset);
  const finish = () => { out({ messages: got, offset: last }); process.exit(0); };
  const timer = setTimeout(finish, Number(timeoutMs));
  consumer.on('error', fail);
  consumer.on('message', (name, payload, next) => {
    got.push({ payload });
    last = next;
    if (got.length >= Number(count)) { clearTimeout(timer); finish(); }
  });
  consumer.connect(() => {
    consumer.subscribeTopic({ name: topic, partition: Number(partition), offset: Number(offset) });
  });
} else {
  fail('unknown mode ' + mode);
}
