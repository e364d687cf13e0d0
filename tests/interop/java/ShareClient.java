// A harness for the Java client's KafkaShareConsumer (kafka-clients 4.x only; OdradekClient.java is also built
// against 3.9, which has no share consumer). Used by tests/interop/test_share_groups.py.
//
// Usage: ShareClient BOOTSTRAP TOPIC GROUP RECORDS CONSUMERS TIMEOUT_MS
// Starts CONSUMERS share consumers of GROUP (explicit acknowledgement), each on its own thread; each accepts
// every record it gets (commitSync per poll) until RECORDS records were received by all together or TIMEOUT_MS
// passed, then closes. Prints one line per record: `consumer<TAB>partition<TAB>offset<TAB>deliveryCount`.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareClient {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int records = Integer.parseInt(args[3]), consumers = Integer.parseInt(args[4]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[5]);
        AtomicInteger received = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                Properties props = new Properties();
                props.put("bootstrap.servers", bootstrap);
                props.put("group.id", group);
                props.put("share.acknowledgement.mode", "explicit");
                props.put("max.poll.records", "5");
                props.put("key.deserializer", StringDeserializer.class.getName());
                props.put("value.deserializer", StringDeserializer.class.getName());
                try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
                    consumer.subscribe(List.of(topic));
                    while (received.get() < records && System.currentTimeMillis() < deadline) {
                        ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<String, String> r : batch) {
                            consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                            synchronized (System.out) {
                                System.out.println(id + "\t" + r.partition() + "\t" + r.offset() + "\t"
                                        + r.deliveryCount().map(String::valueOf).orElse("-"));
                            }
                            received.incrementAndGet();
                        }
                        if (!batch.isEmpty()) {
                            consumer.commitSync();
                        }
                    }
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        System.out.flush();
        if (!failures.isEmpty()) {
            failures.get(0).printStackTrace();
            System.exit(1);
        }
    }
}
