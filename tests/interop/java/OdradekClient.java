import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Minimal Kafka Java client harness for odradek interop tests.
 *
 *   produce BOOT TOPIC N [acks] [compression] [prefix]
 *       sends N records to partition 0 (key "key-i", value VALUE(prefix, i), header "idx"="i")
 *       and prints one acked offset per line, in send order. Idempotence is off.
 *   produce-default BOOT TOPIC N [partitions] [prefix]
 *       the producer with its DEFAULT settings (idempotence on, acks=all, retries, 5 in flight); only
 *       timeouts and linger are set. Record i goes to partition i % partitions (key "key-i", value
 *       VALUE(prefix, i), header "idx"="i"); prints "partition\toffset" per record, in send order.
 *   consume BOOT TOPIC PARTITION N [timeoutMs] [startOffset] [maxPartitionFetchBytes] [isolationLevel]
 *       assigns TOPIC/PARTITION, seeks to the beginning (or to startOffset when >= 0), reads N records and prints
 *       "offset\tkey\tvalue\ttimestamp\theaders" per record (key "<null>" when absent,
 *       headers as "k=v,k=v"). Exit code 3 if fewer than N records arrived in time.
 *   produce-txn BOOT TOPIC N commit|abort[,commit|abort...] [transactionalId] [prefix]
 *       a transactional producer (transactional.id, default "java-txn"): initTransactions, then one
 *       transaction per outcome listed, each sending N records to partition 0 (key "key-i", value
 *       VALUE(prefix, i), i counting on across transactions), flushed, then committed or aborted; prints
 *       each transaction's acked offsets, one per line, then "committed" or "aborted".
 *   produce-load BOOT TOPIC N PARTITIONS INTERVAL_MS
 *       the producer with its DEFAULT settings (idempotence on, acks=all) sending N records, one every
 *       INTERVAL_MS, record i to partition i % PARTITIONS with value "load-i"; prints "ack\tpartition\toffset\ti"
 *       as each acknowledgement arrives (or "error\ti\tmessage"), for tests that break brokers meanwhile.
 *   group-consume BOOT TOPIC GROUP N [timeoutMs]
 *       subscribes to TOPIC in consumer group GROUP (group.protocol=classic), reads N records, commits
 *       synchronously, and prints "partition\toffset\tvalue" per record. Exit code 3 if fewer than N arrived.
 *   quotas-alter BOOT ENTITY OP...
 *       Admin.alterClientQuotas for one entity: ENTITY is "user=NAME", "client-id=NAME" or both joined by
 *       "," (NAME "<default>" for the default); each OP is "key=value" to set or "key=" to remove. Prints "ok",
 *       or "error\tExceptionClass\tmessage" and exits 4.
 *   quotas-describe BOOT [strict] [COMPONENT...]
 *       Admin.describeClientQuotas: each COMPONENT is "type=NAME" (exact), "type=<default>" or "type" (any
 *       name); prints "ENTITY\tkey=value,..." per entity (its parts sorted, keys sorted), or "error..." and
 *       exits 4.
 *   group-member BOOT TOPIC GROUP STOPFILE [timeoutMs]
 *       one member of consumer group GROUP (group.protocol=classic) subscribed to TOPIC, for tests that run
 *       several at once: prints "assigned\tP,P..." at each assignment, "record\tpartition\toffset\tvalue" per
 *       record, and "drained\tP,P..." each time it has read its whole assignment to the end offsets (after an
 *       assignment or after new records) and committed (synchronously; it also commits what it read when
 *       partitions are revoked). It stays in the group until the file STOPFILE exists, then leaves (close).
 *       Exit code 3 if STOPFILE did not appear in time.
 *   cg-member BOOT TOPICS GROUP STOPFILE TIMEOUTMS [key=value...]
 *       one member of consumer group GROUP subscribed to TOPICS (names joined by ","), with the consumer
 *       properties given as key=value after its own defaults (manual commits, from the earliest offset; no
 *       group.protocol, session or heartbeat setting of its own, so "group.protocol=consumer" works), for
 *       tests of either group protocol. Prints, flushed: "member\tMEMBERID" when its member id changes,
 *       "assignment\tT:P,T:P..." (its whole assignment, sorted) after every change (assigned, revoked, lost),
 *       "record\tT\tP\tOFFSET\tVALUE" per record, "committed\tT:P=OFFSET,..." after each synchronous commit
 *       (after every poll that returned records, and of the revoked partitions on revocation) or
 *       "commit-error\tExceptionClass\tmessage". Leaves the group (close) once STOPFILE exists; exit code 3
 *       if it did not appear within TIMEOUTMS.
 *   ctp BOOT IN OUT GROUP TXNID N [abortFirst]
 *       consume-transform-produce, exactly once: a read_committed consumer of IN in group GROUP (at most 10
 *       records a poll) and a transactional producer (TXNID) that sends "t:" + value of each record to
 *       OUT partition 0 and, in the same transaction, the consumer's offsets with sendOffsetsToTransaction
 *       (offsets, consumer.groupMetadata()). Prints "txn\tcommit|abort\tCOUNT" per transaction, until N
 *       records are committed. With abortFirst ("true") the first transaction is flushed, then aborted, and
 *       the consumer rewound to its start; it then prints "committed-after-abort\tP\tOFFSET|none" per
 *       partition of it (the group's committed offset, which the aborted transaction must not have moved).
 *   admin BOOT STEP...
 *       one Admin client running each STEP in order, printing lines prefixed by the step's kind:
 *       create=TOPIC:PARTITIONS[:k=v,k=v]  "created\tTOPIC\tpartitions\treplicationFactor\tk=v,..."
 *                                          (the config the broker reports back), or "error\tcreate\tExceptionClass"
 *       topics                             "topic\tNAME" per topic (not internal), sorted
 *       describe=TOPIC                     "partition\tTOPIC\tP\tleader\treplicas\tisr" per partition
 *       configs=TOPIC:NAME,NAME            "config\tTOPIC\tNAME\tvalue\tsource\treadOnly" per NAME asked for
 *       delete=TOPIC                       "deleted\tTOPIC", or "error\tdelete\tExceptionClass"
 *       ends=TOPIC                         "end\tTOPIC\tP\tearliest\tlatest" per partition (listOffsets)
 *       cluster                            "cluster\tclusterId\tcontrollerId\tnodeId,nodeId..."
 *       groups                             "group\tID\tsimple|consumer" per consumer group, sorted
 *       group=GROUP                        "group-state\tGROUP\tSTATE\tassignor\tmemberCount", then
 *                                          "member\tGROUP\tclientId\tTOPIC-P,..." per member, sorted
 *       offsets=GROUP                      "offset\tGROUP\tTOPIC\tP\tOFFSET" per committed partition, sorted
 *       delete-group=GROUP                 "deleted-group\tGROUP", or "error\tdelete-group\tExceptionClass"
 *
 * Only API common to kafka-clients 3.9 and 4.x is used (4.0 removed, say, poll(long) and
 * sendOffsetsToTransaction(Map, String)), so this one source compiles against both; where 4.x deprecates what
 * 3.9 has no replacement for (Admin.listConsumerGroups, for listGroups), the deprecated call it is.
 *
 * Values must stay in sync with java_value() in helpers.py. Every client also takes the properties of the
 * file that the environment variable ODRADEK_CLIENT_CONFIG names, if set (security settings, say); they are
 * applied after the harness's defaults (timeouts, say), so they win.
 */
public final class OdradekClient {

    /** The properties of the file $ODRADEK_CLIENT_CONFIG names, added to every client's (none if unset). */
    static final Properties EXTRA = new Properties();

    static {
        String path = System.getenv("ODRADEK_CLIENT_CONFIG");
        if (path != null && !path.isEmpty()) {
            try (java.io.FileInputStream in = new java.io.FileInputStream(path)) {
                EXTRA.load(in);
            } catch (java.io.IOException e) {
                throw new RuntimeException("cannot read " + path, e);
            }
        }
    }

    static String value(String prefix, int i) {
        StringBuilder sb = new StringBuilder(prefix).append("value-").append(i).append('-');
        for (int j = 0; j < i % 20; j++) {
            sb.append("abc");
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        switch (args[0]) {
            case "produce":
                if (args.length < 4) usage();
                produce(args[1], args[2], Integer.parseInt(args[3]),
                        args.length > 4 ? args[4] : "all",
                        args.length > 5 ? args[5] : "none",
                        args.length > 6 ? args[6] : "");
                break;
            case "produce-default":
                if (args.length < 4) usage();
                produceDefault(args[1], args[2], Integer.parseInt(args[3]),
                        args.length > 4 ? Integer.parseInt(args[4]) : 1,
                        args.length > 5 ? args[5] : "");
                break;
            case "consume":
                if (args.length < 5) usage();
                consume(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                        args.length > 5 ? Long.parseLong(args[5]) : 60000L,
                        args.length > 6 ? Long.parseLong(args[6]) : -1L,
                        args.length > 7 ? Integer.parseInt(args[7]) : -1,
                        args.length > 8 ? args[8] : "read_uncommitted");
                break;
            case "produce-txn":
                if (args.length < 5) usage();
                produceTxn(args[1], args[2], Integer.parseInt(args[3]), args[4],
                        args.length > 5 ? args[5] : "java-txn", args.length > 6 ? args[6] : "");
                break;
            case "produce-load":
                if (args.length < 6) usage();
                produceLoad(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                        Long.parseLong(args[5]));
                break;
            case "group-consume":
                if (args.length < 5) usage();
                groupConsume(args[1], args[2], args[3], Integer.parseInt(args[4]),
                        args.length > 5 ? Long.parseLong(args[5]) : 60000L);
                break;
            case "group-member":
                if (args.length < 5) usage();
                groupMember(args[1], args[2], args[3], args[4], args.length > 5 ? Long.parseLong(args[5]) : 60000L);
                break;
            case "cg-member":
                if (args.length < 6) usage();
                cgMember(args[1], args[2], args[3], args[4], Long.parseLong(args[5]),
                        java.util.Arrays.copyOfRange(args, 6, args.length));
                break;
            case "ctp":
                if (args.length < 7) usage();
                consumeTransformProduce(args[1], args[2], args[3], args[4], args[5], Integer.parseInt(args[6]),
                        args.length > 7 && Boolean.parseBoolean(args[7]));
                break;
            case "admin":
                if (args.length < 2) usage();
                adminSteps(args[1], java.util.Arrays.copyOfRange(args, 2, args.length));
                break;
            case "quotas-alter":
                if (args.length < 3) usage();
                quotasAlter(args[1], args[2], java.util.Arrays.copyOfRange(args, 3, args.length));
                break;
            case "quotas-describe":
                if (args.length < 2) usage();
                quotasDescribe(args[1], java.util.Arrays.copyOfRange(args, 2, args.length));
                break;
            default:
                usage();
        }
    }

    static void usage() {
        System.err.println("usage: produce BOOT TOPIC N [acks] [compression] [prefix]"
                + " | produce-default BOOT TOPIC N [partitions] [prefix]"
                + " | consume BOOT TOPIC PARTITION N [timeoutMs] [startOffset] [maxPartitionFetchBytes] [isolationLevel]"
                + " | produce-txn BOOT TOPIC N commit|abort[,...] [transactionalId] [prefix]"
                + " | produce-load BOOT TOPIC N PARTITIONS INTERVAL_MS"
                + " | group-consume BOOT TOPIC GROUP N [timeoutMs]"
                + " | group-member BOOT TOPIC GROUP STOPFILE [timeoutMs]"
                + " | cg-member BOOT TOPICS GROUP STOPFILE TIMEOUTMS [key=value...]"
                + " | ctp BOOT IN OUT GROUP TXNID N [abortFirst] | admin BOOT STEP..."
                + " | quotas-alter BOOT ENTITY OP... | quotas-describe BOOT [strict] [COMPONENT...]");
        System.exit(2);
    }

    /** What every producer here shares: String keys and values, bounded waits, a short linger. */
    static Properties producerProperties(String boot) {
        Properties p = new Properties();
        p.put("bootstrap.servers", boot);
        p.put("linger.ms", "5");
        p.put("max.block.ms", "30000");
        p.put("request.timeout.ms", "20000");
        p.put("delivery.timeout.ms", "45000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.putAll(EXTRA);
        return p;
    }

    static void produce(String boot, String topic, int n, String acks, String compression, String prefix)
            throws Exception {
        Properties p = producerProperties(boot);
        p.put("enable.idempotence", "false");
        p.put("acks", acks);
        p.put("compression.type", compression);
        p.put("retries", "3");
        p.put("max.in.flight.requests.per.connection", "1");
        List<Future<RecordMetadata>> futures = new ArrayList<>(n);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                ProducerRecord<String, String> rec =
                        new ProducerRecord<>(topic, 0, "key-" + i, value(prefix, i));
                rec.headers().add("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                futures.add(producer.send(rec));
            }
            producer.flush();
            for (Future<RecordMetadata> f : futures) {
                RecordMetadata md = f.get(45, TimeUnit.SECONDS);
                System.out.println(md.offset());
            }
        }
        System.out.flush();
    }

    static void produceTxn(String boot, String topic, int n, String outcomes, String txnId, String prefix)
            throws Exception {
        Properties p = producerProperties(boot);
        p.put("transactional.id", txnId);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            int i = 0;
            for (String outcome : outcomes.split(",")) {
                List<Future<RecordMetadata>> futures = new ArrayList<>(n);
                producer.beginTransaction();
                for (int end = i + n; i < end; i++) {
                    futures.add(producer.send(new ProducerRecord<>(topic, 0, "key-" + i, value(prefix, i))));
                }
                producer.flush();
                for (Future<RecordMetadata> f : futures) {
                    System.out.println(f.get(45, TimeUnit.SECONDS).offset());
                }
                if (outcome.equals("commit")) {
                    producer.commitTransaction();
                    System.out.println("committed");
                } else {
                    producer.abortTransaction();
                    System.out.println("aborted");
                }
            }
        }
        System.out.flush();
    }

    static void produceDefault(String boot, String topic, int n, int partitions, String prefix) throws Exception {
        Properties p = producerProperties(boot);
        List<Future<RecordMetadata>> futures = new ArrayList<>(n);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                ProducerRecord<String, String> rec =
                        new ProducerRecord<>(topic, i % partitions, "key-" + i, value(prefix, i));
                rec.headers().add("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                futures.add(producer.send(rec));
            }
            producer.flush();
            for (Future<RecordMetadata> f : futures) {
                RecordMetadata md = f.get(45, TimeUnit.SECONDS);
                System.out.println(md.partition() + "\t" + md.offset());
            }
        }
        System.out.flush();
    }

    static void produceLoad(String boot, String topic, int n, int partitions, long intervalMs) throws Exception {
        Properties p = producerProperties(boot);
        p.put("delivery.timeout.ms", "120000");
        p.put("request.timeout.ms", "15000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                final int idx = i;
                producer.send(new ProducerRecord<>(topic, i % partitions, "key-" + i, "load-" + i), (md, e) -> {
                    synchronized (System.out) {
                        if (e != null) {
                            System.out.println("error\t" + idx + "\t" + e);
                        } else {
                            System.out.println("ack\t" + md.partition() + "\t" + md.offset() + "\t" + idx);
                        }
                        System.out.flush();
                    }
                });
                if (intervalMs > 0) {
                    Thread.sleep(intervalMs);
                }
            }
            producer.flush();
        }
        System.out.flush();
    }

    /** A classic-protocol group member's settings: manual commits, from the earliest offset, bounded waits. */
    static Properties groupProperties(String boot, String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", boot);
        p.put("group.id", group);
        p.put("group.protocol", "classic");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("session.timeout.ms", "6000");
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.putAll(EXTRA);
        return p;
    }

    static void groupConsume(String boot, String topic, String group, int n, long timeoutMs) {
        Properties p = groupProperties(boot, group);
        int seen = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(Collections.singletonList(topic));
            int polls = 0;
            while (seen < n && System.currentTimeMillis() < deadline && polls < 10000) {
                polls++;
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println(r.partition() + "\t" + r.offset() + "\t" + str(r.value()));
                    seen++;
                }
            }
            consumer.commitSync(Duration.ofSeconds(30));
        }
        System.out.flush();
        if (seen < n) {
            System.err.println("group-consume: only " + seen + " of " + n + " records before timeout");
            System.exit(3);
        }
    }

    /** One line to stdout, flushed at once: tests read the output of running members as it comes. */
    static void out(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static String partitionList(Collection<TopicPartition> tps) {
        TreeSet<Integer> sorted = new TreeSet<>();
        for (TopicPartition tp : tps) {
            sorted.add(tp.partition());
        }
        StringBuilder sb = new StringBuilder();
        for (int p : sorted) {
            if (sb.length() > 0) sb.append(',');
            sb.append(p);
        }
        return sb.toString();
    }

    static void groupMember(String boot, String topic, String group, String stopFile, long timeoutMs) {
        Properties p = groupProperties(boot, group);
        p.put("heartbeat.interval.ms", "500");  // so a member learns of a rebalance (another member joining) soon
        p.putAll(EXTRA);
        java.io.File stop = new java.io.File(stopFile);
        long deadline = System.currentTimeMillis() + timeoutMs;
        boolean stopped = false;
        // whether the current assignment has been read to its end offsets and committed
        final boolean[] drained = {false};
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    // Hand over exactly what was read: the next owner then starts there, nothing read twice.
                    if (!parts.isEmpty()) {
                        consumer.commitSync(Duration.ofSeconds(30));
                    }
                    drained[0] = false;
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    out("assigned\t" + partitionList(parts));
                    drained[0] = false;
                }
            });
            int polls = 0;
            while (System.currentTimeMillis() < deadline && polls < 100000) {
                polls++;
                if (stop.exists()) {
                    stopped = true;
                    break;
                }
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    out("record\t" + r.partition() + "\t" + r.offset() + "\t" + str(r.value()));
                    drained[0] = false;  // more arrived: read to the end and commit again
                }
                Set<TopicPartition> assigned = consumer.assignment();
                if (!recs.isEmpty() || drained[0] || assigned.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, Long> ends = consumer.endOffsets(assigned, Duration.ofSeconds(30));
                boolean atEnd = true;
                for (TopicPartition tp : assigned) {
                    atEnd &= consumer.position(tp, Duration.ofSeconds(30)) >= ends.get(tp);
                }
                if (!atEnd) {
                    continue;
                }
                try {
                    consumer.commitSync(Duration.ofSeconds(30));
                } catch (org.apache.kafka.clients.consumer.CommitFailedException
                         | org.apache.kafka.common.errors.RebalanceInProgressException e) {
                    continue;  // a rebalance began: the next poll rejoins, and the new assignment is drained anew
                }
                drained[0] = true;
                out("drained\t" + partitionList(assigned));
            }
        }
        if (!stopped) {
            System.err.println("group-member: " + stopFile + " did not appear in time");
            System.exit(3);
        }
    }

    static String topicPartitions(Collection<TopicPartition> tps) {
        TreeSet<String> sorted = new TreeSet<>();
        for (TopicPartition tp : tps) {
            sorted.add(tp.topic() + ":" + tp.partition());
        }
        return String.join(",", sorted);
    }

    /** What stays of an assignment once `gone` is taken away (a listener sees the assignment before the change). */
    static Set<TopicPartition> remaining(Set<TopicPartition> assignment, Collection<TopicPartition> gone) {
        Set<TopicPartition> left = new java.util.HashSet<>(assignment);
        left.removeAll(gone);
        return left;
    }

    /** Commit what was read of `parts` (all of the assignment when null), synchronously; print the outcome. */
    static void cgCommit(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> next,
                         Collection<TopicPartition> parts) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (Map.Entry<TopicPartition, Long> e : next.entrySet()) {
            if (parts == null || parts.contains(e.getKey())) {
                offsets.put(e.getKey(), new OffsetAndMetadata(e.getValue()));
            }
        }
        if (offsets.isEmpty()) {
            return;
        }
        try {
            consumer.commitSync(offsets, Duration.ofSeconds(30));
        } catch (org.apache.kafka.common.KafkaException e) {
            out("commit-error\t" + e.getClass().getSimpleName() + "\t" + e.getMessage());
            return;
        }
        TreeSet<String> done = new TreeSet<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            done.add(e.getKey().topic() + ":" + e.getKey().partition() + "=" + e.getValue().offset());
            next.remove(e.getKey());
        }
        out("committed\t" + String.join(",", done));
    }

    static void cgMember(String boot, String topics, String group, String stopFile, long timeoutMs, String[] props) {
        Properties p = new Properties();
        p.put("bootstrap.servers", boot);
        p.put("group.id", group);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        for (String kv : props) {
            String[] parts = kv.split("=", 2);
            if (parts.length != 2) usage();
            p.put(parts[0], parts[1]);
        }
        p.putAll(EXTRA);
        java.io.File stop = new java.io.File(stopFile);
        long deadline = System.currentTimeMillis() + timeoutMs;
        boolean stopped = false;
        // the next offset to commit per partition read since the last commit
        final Map<TopicPartition, Long> next = new HashMap<>();
        final String[] memberId = {""};
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(java.util.Arrays.asList(topics.split(",")), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    // hand over exactly what was read: the next owner starts there
                    cgCommit(consumer, next, parts);
                    for (TopicPartition tp : parts) {
                        next.remove(tp);
                    }
                    out("assignment\t" + topicPartitions(remaining(consumer.assignment(), parts)));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    out("assignment\t" + topicPartitions(consumer.assignment()));
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    for (TopicPartition tp : parts) {
                        next.remove(tp);  // not ours any more: a commit would be refused
                    }
                    out("assignment\t" + topicPartitions(remaining(consumer.assignment(), parts)));
                }
            });
            int polls = 0;
            while (System.currentTimeMillis() < deadline && polls < 100000) {
                polls++;
                if (stop.exists()) {
                    stopped = true;
                    break;
                }
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                String id = consumer.groupMetadata().memberId();
                if (!id.equals(memberId[0])) {
                    memberId[0] = id;
                    out("member\t" + id);
                }
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    out("record\t" + r.topic() + "\t" + r.partition() + "\t" + r.offset() + "\t" + str(r.value()));
                    next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                }
                if (!recs.isEmpty()) {
                    cgCommit(consumer, next, null);
                }
            }
            cgCommit(consumer, next, null);
        }
        if (!stopped) {
            System.err.println("cg-member: " + stopFile + " did not appear in time");
            System.exit(3);
        }
    }

    static void consumeTransformProduce(String boot, String in, String outTopic, String group, String txnId, int n,
                                        boolean abortFirst) throws Exception {
        Properties cp = groupProperties(boot, group);
        cp.put("isolation.level", "read_committed");
        cp.put("max.poll.records", "10");  // several transactions even when all input is there at once
        cp.putAll(EXTRA);
        Properties pp = producerProperties(boot);
        pp.put("transactional.id", txnId);
        int committed = 0;
        boolean abortNext = abortFirst;
        long deadline = System.currentTimeMillis() + 60000;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(in));
            int polls = 0;
            while (committed < n && System.currentTimeMillis() < deadline && polls < 10000) {
                polls++;
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                Map<TopicPartition, Long> first = new HashMap<>();
                producer.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    first.putIfAbsent(tp, r.offset());
                    next.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    producer.send(new ProducerRecord<>(outTopic, 0, str(r.key()), "t:" + str(r.value())));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                if (!abortNext) {
                    producer.commitTransaction();
                    committed += recs.count();
                    out("txn\tcommit\t" + recs.count());
                    continue;
                }
                // Written first: abortTransaction drops what is still unsent, and the test wants the aborted
                // records in the log (invisible to read_committed), not just a marker.
                producer.flush();
                producer.abortTransaction();
                abortNext = false;
                out("txn\tabort\t" + recs.count());
                // The aborted transaction's offsets must not count: rewind, and show what the group has.
                for (Map.Entry<TopicPartition, Long> e : first.entrySet()) {
                    consumer.seek(e.getKey(), e.getValue());
                }
                Map<TopicPartition, OffsetAndMetadata> after = consumer.committed(first.keySet(), Duration.ofSeconds(30));
                TreeMap<Integer, OffsetAndMetadata> byPartition = new TreeMap<>();
                for (TopicPartition tp : first.keySet()) {
                    byPartition.put(tp.partition(), after.get(tp));
                }
                for (Map.Entry<Integer, OffsetAndMetadata> e : byPartition.entrySet()) {
                    OffsetAndMetadata om = e.getValue();
                    out("committed-after-abort\t" + e.getKey() + "\t" + (om == null ? "none" : Long.toString(om.offset())));
                }
            }
        }
        if (committed < n) {
            System.err.println("ctp: only " + committed + " of " + n + " records committed before timeout");
            System.exit(3);
        }
    }

    static String errorName(java.util.concurrent.ExecutionException e) {
        return e.getCause() == null ? e.getClass().getSimpleName() : e.getCause().getClass().getSimpleName();
    }

    static String nodeIds(List<Node> nodes) {
        StringBuilder sb = new StringBuilder();
        for (Node node : nodes) {
            if (sb.length() > 0) sb.append(',');
            sb.append(node.id());
        }
        return sb.toString();
    }

    /**
     * A consumer group's state as text. ConsumerGroupDescription.state() (ConsumerGroupState) is deprecated in
     * 4.x for groupState() (GroupState), which 3.9 lacks; both enums print as Kafka's names ("Stable"), so call
     * whichever this client has.
     */
    static String groupState(ConsumerGroupDescription d) throws Exception {
        java.lang.reflect.Method m;
        try {
            m = d.getClass().getMethod("groupState");
        } catch (NoSuchMethodException e) {
            m = d.getClass().getMethod("state");
        }
        return String.valueOf(m.invoke(d));
    }

    static void adminSteps(String boot, String[] steps) throws Exception {
        try (Admin admin = admin(boot)) {
            for (String step : steps) {
                String[] kv = step.split("=", 2);
                String arg = kv.length > 1 ? kv[1] : "";
                switch (kv[0]) {
                    case "create": {
                        String[] parts = arg.split(":", 3);
                        Map<String, String> configs = new TreeMap<>();
                        if (parts.length > 2) {
                            for (String c : parts[2].split(",")) {
                                String[] ckv = c.split("=", 2);
                                configs.put(ckv[0], ckv[1]);
                            }
                        }
                        NewTopic topic = new NewTopic(parts[0], java.util.Optional.of(Integer.parseInt(parts[1])),
                                java.util.Optional.empty()).configs(configs);
                        CreateTopicsResult result = admin.createTopics(Collections.singletonList(topic));
                        try {
                            result.all().get();
                        } catch (java.util.concurrent.ExecutionException e) {
                            out("error\tcreate\t" + errorName(e));
                            break;
                        }
                        Config reported = result.config(parts[0]).get();
                        List<String> given = new ArrayList<>();
                        for (String name : configs.keySet()) {
                            ConfigEntry entry = reported.get(name);
                            given.add(name + "=" + (entry == null ? "<absent>" : entry.value()));
                        }
                        out("created\t" + parts[0] + "\t" + result.numPartitions(parts[0]).get() + "\t"
                                + result.replicationFactor(parts[0]).get() + "\t" + String.join(",", given));
                        break;
                    }
                    case "topics":
                        for (String name : new TreeSet<>(admin.listTopics().names().get())) {
                            out("topic\t" + name);
                        }
                        break;
                    case "describe": {
                        TopicDescription d = admin.describeTopics(Collections.singletonList(arg)).allTopicNames().get().get(arg);
                        for (TopicPartitionInfo info : d.partitions()) {
                            out("partition\t" + arg + "\t" + info.partition() + "\t" + info.leader().id() + "\t"
                                    + nodeIds(info.replicas()) + "\t" + nodeIds(info.isr()));
                        }
                        break;
                    }
                    case "configs": {
                        String[] parts = arg.split(":", 2);
                        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, parts[0]);
                        Config config = admin.describeConfigs(Collections.singletonList(res)).all().get().get(res);
                        for (String name : parts[1].split(",")) {
                            ConfigEntry e = config.get(name);
                            out("config\t" + parts[0] + "\t" + name + "\t" + (e == null ? "<absent>" : e.value() + "\t"
                                    + e.source() + "\t" + e.isReadOnly()));
                        }
                        break;
                    }
                    case "delete":
                        try {
                            admin.deleteTopics(Collections.singletonList(arg)).all().get();
                            out("deleted\t" + arg);
                        } catch (java.util.concurrent.ExecutionException e) {
                            out("error\tdelete\t" + errorName(e));
                        }
                        break;
                    case "ends": {
                        TopicDescription d = admin.describeTopics(Collections.singletonList(arg)).allTopicNames().get().get(arg);
                        Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
                        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                        for (TopicPartitionInfo info : d.partitions()) {
                            earliest.put(new TopicPartition(arg, info.partition()), OffsetSpec.earliest());
                            latest.put(new TopicPartition(arg, info.partition()), OffsetSpec.latest());
                        }
                        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> lo = admin.listOffsets(earliest).all().get();
                        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> hi = admin.listOffsets(latest).all().get();
                        for (TopicPartitionInfo info : d.partitions()) {
                            TopicPartition tp = new TopicPartition(arg, info.partition());
                            out("end\t" + arg + "\t" + info.partition() + "\t" + lo.get(tp).offset() + "\t" + hi.get(tp).offset());
                        }
                        break;
                    }
                    case "cluster": {
                        DescribeClusterResult c = admin.describeCluster();
                        out("cluster\t" + c.clusterId().get() + "\t" + c.controller().get().id() + "\t"
                                + nodeIds(new ArrayList<>(c.nodes().get())));
                        break;
                    }
                    case "groups": {
                        TreeMap<String, Boolean> groups = new TreeMap<>();
                        for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
                            groups.put(g.groupId(), g.isSimpleConsumerGroup());
                        }
                        for (Map.Entry<String, Boolean> g : groups.entrySet()) {
                            out("group\t" + g.getKey() + "\t" + (g.getValue() ? "simple" : "consumer"));
                        }
                        break;
                    }
                    case "group": {
                        ConsumerGroupDescription d = admin.describeConsumerGroups(Collections.singletonList(arg)).all().get().get(arg);
                        out("group-state\t" + arg + "\t" + groupState(d) + "\t" + d.partitionAssignor() + "\t" + d.members().size());
                        List<String> members = new ArrayList<>();
                        for (MemberDescription m : d.members()) {
                            List<String> tps = new ArrayList<>();
                            for (TopicPartition tp : m.assignment().topicPartitions()) {
                                tps.add(tp.topic() + "-" + tp.partition());
                            }
                            Collections.sort(tps);
                            members.add("member\t" + arg + "\t" + m.clientId() + "\t" + String.join(",", tps));
                        }
                        Collections.sort(members);
                        for (String line : members) {
                            out(line);
                        }
                        break;
                    }
                    case "offsets": {
                        Map<TopicPartition, OffsetAndMetadata> offsets =
                                admin.listConsumerGroupOffsets(arg).partitionsToOffsetAndMetadata().get();
                        List<String> lines = new ArrayList<>();
                        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                            lines.add("offset\t" + arg + "\t" + e.getKey().topic() + "\t" + e.getKey().partition() + "\t"
                                    + e.getValue().offset());
                        }
                        Collections.sort(lines);
                        for (String line : lines) {
                            out(line);
                        }
                        break;
                    }
                    case "delete-group":
                        try {
                            admin.deleteConsumerGroups(Collections.singletonList(arg)).all().get();
                            out("deleted-group\t" + arg);
                        } catch (java.util.concurrent.ExecutionException e) {
                            out("error\tdelete-group\t" + errorName(e));
                        }
                        break;
                    default:
                        System.err.println("admin: unknown step " + step);
                        System.exit(2);
                }
            }
        }
    }

    static String str(byte[] b) {
        return b == null ? "<null>" : new String(b, StandardCharsets.UTF_8);
    }

    static void consume(String boot, String topic, int partition, int n, long timeoutMs, long startOffset,
                        int maxPartitionFetchBytes, String isolationLevel) {
        Properties p = new Properties();
        p.put("bootstrap.servers", boot);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("isolation.level", isolationLevel);
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.putAll(EXTRA);
        if (maxPartitionFetchBytes > 0) {
            p.put("max.partition.fetch.bytes", Integer.toString(maxPartitionFetchBytes));
            p.put("fetch.max.bytes", Integer.toString(maxPartitionFetchBytes));
        }
        int seen = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, partition);
            consumer.assign(Collections.singletonList(tp));
            if (startOffset >= 0) {
                consumer.seek(tp, startOffset);
            } else {
                consumer.seekToBeginning(Collections.singletonList(tp));
            }
            int polls = 0;
            while (seen < n && System.currentTimeMillis() < deadline && polls < 10000) {
                polls++;
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    StringBuilder hs = new StringBuilder();
                    for (Header h : r.headers()) {
                        if (hs.length() > 0) hs.append(',');
                        hs.append(h.key()).append('=').append(str(h.value()));
                    }
                    System.out.println(r.offset() + "\t" + str(r.key()) + "\t" + str(r.value())
                            + "\t" + r.timestamp() + "\t" + hs);
                    seen++;
                }
            }
        }
        System.out.flush();
        if (seen < n) {
            System.err.println("consume: only " + seen + " of " + n + " records before timeout");
            System.exit(3);
        }
    }

    static Admin admin(String boot) {
        Properties p = new Properties();
        p.put("bootstrap.servers", boot);
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        p.putAll(EXTRA);
        return Admin.create(p);
    }

    static String quotaName(String name) {
        return "<default>".equals(name) ? null : name;
    }

    static void quotasAlter(String boot, String entitySpec, String[] ops) throws Exception {
        java.util.Map<String, String> parts = new java.util.HashMap<>();
        for (String part : entitySpec.split(",")) {
            String[] kv = part.split("=", 2);
            parts.put(kv[0], quotaName(kv[1]));
        }
        List<ClientQuotaAlteration.Op> alterations = new ArrayList<>();
        for (String op : ops) {
            String[] kv = op.split("=", 2);
            alterations.add(new ClientQuotaAlteration.Op(kv[0], kv[1].isEmpty() ? null : Double.valueOf(kv[1])));
        }
        try (Admin admin = admin(boot)) {
            admin.alterClientQuotas(Collections.singletonList(
                    new ClientQuotaAlteration(new ClientQuotaEntity(parts), alterations))).all().get();
            System.out.println("ok");
        } catch (java.util.concurrent.ExecutionException e) {
            System.out.println("error\t" + e.getCause().getClass().getSimpleName() + "\t" + e.getCause().getMessage());
            System.exit(4);
        }
    }

    static void quotasDescribe(String boot, String[] args) throws Exception {
        boolean strict = false;
        List<ClientQuotaFilterComponent> components = new ArrayList<>();
        for (String arg : args) {
            if (arg.equals("strict")) {
                strict = true;
            } else if (!arg.contains("=")) {
                components.add(ClientQuotaFilterComponent.ofEntityType(arg));
            } else {
                String[] kv = arg.split("=", 2);
                components.add(kv[1].equals("<default>") ? ClientQuotaFilterComponent.ofDefaultEntity(kv[0])
                        : ClientQuotaFilterComponent.ofEntity(kv[0], kv[1]));
            }
        }
        ClientQuotaFilter filter = strict ? ClientQuotaFilter.containsOnly(components) : ClientQuotaFilter.contains(components);
        try (Admin admin = admin(boot)) {
            java.util.Map<ClientQuotaEntity, java.util.Map<String, Double>> found =
                    admin.describeClientQuotas(filter).entities().get();
            List<String> lines = new ArrayList<>();
            for (java.util.Map.Entry<ClientQuotaEntity, java.util.Map<String, Double>> e : found.entrySet()) {
                List<String> parts = new ArrayList<>();
                for (java.util.Map.Entry<String, String> part : new java.util.TreeMap<>(e.getKey().entries()).entrySet()) {
                    parts.add(part.getKey() + "=" + (part.getValue() == null ? "<default>" : part.getValue()));
                }
                List<String> values = new ArrayList<>();
                for (java.util.Map.Entry<String, Double> v : new java.util.TreeMap<>(e.getValue()).entrySet()) {
                    values.add(v.getKey() + "=" + v.getValue());
                }
                lines.add(String.join(",", parts) + "\t" + String.join(",", values));
            }
            Collections.sort(lines);
            for (String line : lines) {
                System.out.println(line);
            }
        } catch (java.util.concurrent.ExecutionException e) {
            System.out.println("error\t" + e.getCause().getClass().getSimpleName() + "\t" + e.getCause().getMessage());
            System.exit(4);
        }
    }
}
