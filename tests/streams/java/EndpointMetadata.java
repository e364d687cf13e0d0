// A Kafka Streams application with application.server set, for tests/streams/test_streams_endpoints.py:
// what KafkaStreams.metadataForAllStreamsClients() says of every instance of the application (with
// group.protocol=streams it comes from the heartbeat's PartitionsByUserEndpoint).
//
//   java EndpointMetadata <bootstrap> <application.id> <input> <group.protocol> <state.dir> <host:port>
//
// The topology counts the records of <input> per key into a store (a changelog topic, so a stateful task
// per input partition). It prints, one per line on stdout:
//   STATE <new state>                                   on every state change
//   CLIENTS <host:port>=<topic-partitions>;...          whenever that metadata changes (polled every 200 ms),
//                                                      the instances in host:port order, each with its
//                                                      active partitions as topic-partition,... in order
// and closes when a line "close" arrives on stdin (or stdin ends).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.StreamsMetadata;
import org.apache.kafka.streams.kstream.Materialized;

public class EndpointMetadata {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[3]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, args[5]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2]).groupByKey().count(Materialized.as("per-key"));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> say("STATE " + now));
        streams.start();
        Thread watcher = new Thread(() -> {
            String last = "";
            while (!Thread.currentThread().isInterrupted()) {
                try {
                    TreeMap<String, String> clients = new TreeMap<>();
                    for (StreamsMetadata m : streams.metadataForAllStreamsClients()) {
                        TreeSet<String> parts = new TreeSet<>();
                        for (TopicPartition tp : m.topicPartitions()) parts.add(tp.topic() + "-" + tp.partition());
                        clients.put(m.host() + ":" + m.port(), String.join(",", parts));
                    }
                    StringBuilder now = new StringBuilder("CLIENTS ");
                    clients.forEach((k, v) -> now.append(k).append('=').append(v).append(';'));
                    if (!now.toString().equals(last)) {
                        last = now.toString();
                        say(last);
                    }
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    try { Thread.sleep(200); } catch (InterruptedException ie) { return; }
                }
            }
        });
        watcher.setDaemon(true);
        watcher.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("close")) {
            // nothing else is understood
        }
        watcher.interrupt();
        boolean closed = streams.close(Duration.ofSeconds(60));
        say(closed ? "CLOSED" : "CLOSE-TIMEOUT");
        System.exit(closed ? 0 : 1);
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
