package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// value is the i-th value produce writes: compressible, so a codec makes batches smaller.
func value(prefix string, i int) string {
	return fmt.Sprintf("%s-value-%d-%s", prefix, i, strings.Repeat("abc", i%20))
}

// produce writes -n records to partition i % -partitions: key "k-i" (none for every fifth), headers
// i=<i> and client=franz; it prints each record's partition and offset in produce order.
func produce(args []string) error {
	f := newFlags("produce")
	topic := f.String("topic", "", "topic")
	n := f.Int("n", 10, "records")
	partitions := f.Int("partitions", 1, "record i goes to partition i % partitions")
	codec := f.String("compression", "none", "none, gzip, snappy, lz4 or zstd")
	prefix := f.String("prefix", "franz", "value prefix")
	ctx, cancel := f.parse(args)
	defer cancel()
	c, ok := codecs[*codec]
	if !ok {
		return fmt.Errorf("unknown codec %q", *codec)
	}
	cl, err := kgo.NewClient(f.opts(kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(c), kgo.ProducerLinger(20*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	type result struct {
		P   int32 `json:"p"`
		O   int64 `json:"o"`
		err error
	}
	results := make([]result, *n)
	var wg sync.WaitGroup
	for i := 0; i < *n; i++ {
		r := &kgo.Record{Topic: *topic, Partition: int32(i % *partitions), Value: []byte(value(*prefix, i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}, {Key: "client", Value: []byte("franz")}}}
		if i%5 != 4 {
			r.Key = []byte(fmt.Sprintf("k-%d", i))
		}
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			results[i] = result{r.Partition, r.Offset, err}
			wg.Done()
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			return fmt.Errorf("record %d: %w", i, r.err)
		}
		emit(r)
	}
	return nil
}

// record is how consume prints a record.
type record struct {
	P       int32       `json:"p"`
	O       int64       `json:"o"`
	K       *string     `json:"k"`
	V       string      `json:"v"`
	H       [][2]string `json:"h"`
	TS      int64       `json:"ts"`
	Codec   uint8       `json:"codec"` // the batch's compression: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
	PID     int64       `json:"pid"`   // the batch's producer id (-1: not idempotent)
	Control bool        `json:"control,omitempty"`
}

func toRecord(r *kgo.Record) record {
	out := record{P: r.Partition, O: r.Offset, V: string(r.Value), H: [][2]string{}, TS: r.Timestamp.UnixMilli(),
		Codec: r.Attrs.CompressionType(), PID: r.ProducerID, Control: r.Attrs.IsControl()}
	if r.Key != nil {
		k := string(r.Key)
		out.K = &k
	}
	for _, h := range r.Headers {
		out.H = append(out.H, [2]string{h.Key, string(h.Value)})
	}
	return out
}

// consume reads every partition of -topic from its start until -n records have come, then for -extra
// more (to see records that should not be there), and prints them, then {"count": N}.
func consume(args []string) error {
	f := newFlags("consume")
	topic := f.String("topic", "", "topic")
	n := f.Int("n", 10, "records to wait for")
	extra := f.Duration("extra", 0, "keep reading this long after -n records")
	committed := f.Bool("read-committed", false, "read_committed isolation")
	ctx, cancel := f.parse(args)
	defer cancel()
	isolation := kgo.ReadUncommitted()
	if *committed {
		isolation = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(f.opts(kgo.ConsumeTopics(*topic), kgo.FetchIsolationLevel(isolation),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	count := 0
	poll := func(ctx context.Context) error {
		fetches := cl.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			emit(toRecord(r))
			count++
		})
		return polled(ctx, fetches)
	}
	for count < *n && ctx.Err() == nil {
		if err := poll(ctx); err != nil {
			return err
		}
	}
	if count < *n {
		return fmt.Errorf("%d of %d records within %s", count, *n, *f.timeout)
	}
	more, stop := context.WithTimeout(ctx, *extra)
	defer stop()
	for more.Err() == nil {
		if err := poll(more); err != nil {
			return err
		}
	}
	emit(map[string]int{"count": count})
	return nil
}
