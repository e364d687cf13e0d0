// Kafka Streams word count, the application of tests/streams/test_streams_word_count.py: compiled in the test
// against kafka-streams 4.4 from Maven Central (tests/streams/pom.xml).
//
//   java WordCount <bootstrap> <application.id> <input> <output> <group.protocol> <state.dir> <standbys>
//                  [<processing.guarantee>]
//
// Lines read from <input> are split into words; each word's running count goes to <output> (key: word,
// value: count as a decimal string). groupBy makes a repartition topic and count() a changelog topic, so
// both kinds of internal topic are exercised. It prints, one per line on stdout:
//   STATE <new state>                         on every state change
//   TASKS active=<ids> standby=<ids>          whenever the tasks of its threads change (polled every 200 ms)
//   CLOSED                                    after a clean close
// and closes cleanly when a line "close" arrives on stdin (or stdin ends).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class WordCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], protocol = args[4];
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, Integer.parseInt(args[6]));
        if (args.length > 7) props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[7]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // replication.factor stays -1: the internal topics get the broker's default.replication.factor
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        if (protocol.equals("classic")) {
            // Streams closes without leaving a classic group, so a closed instance's tasks move only when its
            // session expires: 10 s (Kafka's default before 3.0; the brokers' minimum is 6 s) rather than 45 s,
            // with heartbeats every second so that a join is noticed soon. The streams protocol has neither:
            // its session timeout and heartbeat interval are the broker's (group.streams.*).
            props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
            props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input)
            .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\s+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word)
            .count(Materialized.as("counts"))
            .toStream()
            .mapValues(count -> Long.toString(count))
            .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> say("STATE " + now));
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        Thread watcher = new Thread(() -> {
            String last = "";
            while (true) {
                try {
                    TreeSet<String> active = new TreeSet<>(), standby = new TreeSet<>();
                    for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                        for (TaskMetadata task : t.activeTasks()) active.add(task.taskId().toString());
                        for (TaskMetadata task : t.standbyTasks()) standby.add(task.taskId().toString());
                    }
                    String now = "TASKS active=" + String.join(",", active) + " standby=" + String.join(",", standby);
                    if (!now.equals(last)) {
                        say(now);
                        last = now;
                    }
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    // not running yet or closing: try again
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
