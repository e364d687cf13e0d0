import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
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
 *   produce-txn BOOT TOPIC N commit|abort [transactionalId] [prefix]
 *       a transactional producer (transactional.id, default "java-txn"): initTransactions, one transaction
 *       sending N records to partition 0 (key "key-i", value VALUE(prefix, i)), flushed, then committed or
 *       aborted; prints the acked offsets, one per line, then "committed" or "aborted".
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
                + " | produce-txn BOOT TOPIC N commit|abort [transactionalId] [prefix]"
                + " | produce-load BOOT TOPIC N PARTITIONS INTERVAL_MS"
                + " | group-consume BOOT TOPIC GROUP N [timeoutMs]"
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

    static void produceTxn(String boot, String topic, int n, String outcome, String txnId, String prefix)
            throws Exception {
        Properties p = producerProperties(boot);
        p.put("transactional.id", txnId);
        List<Future<RecordMetadata>> futures = new ArrayList<>(n);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < n; i++) {
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

    static void groupConsume(String boot, String topic, String group, int n, long timeoutMs) {
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
