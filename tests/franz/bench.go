package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchResult is what bench and loopback print.
type benchResult struct {
	Mode      string  `json:"mode"`
	Records   int64   `json:"records"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	MsgsPerS  float64 `json:"msgs_per_s"`
	MBPerS    float64 `json:"mb_per_s"` // 1 MB = 10^6 bytes of values
	Capped    bool    `json:"capped"`   // the -duration cap ended it before -n records
	FirstErr  string  `json:"first_error,omitempty"`
	Failures  int64   `json:"failures"`
	SizeBytes int     `json:"size"`
}

func (r *benchResult) finish(elapsed time.Duration) {
	r.Seconds = elapsed.Seconds()
	if r.Seconds > 0 {
		r.MsgsPerS = float64(r.Records) / r.Seconds
		r.MBPerS = float64(r.Bytes) / r.Seconds / 1e6
	}
}

// bench produces -n records of -size random bytes (no key, no compression) to partition 0 of -topic as
// fast as the client goes (-mode produce, -acks 1 or all), or reads -n records from its start (-mode
// consume); either stops at -duration, counting only what was acknowledged or read by then.
func bench(args []string) error {
	f := newFlags("bench")
	mode := f.String("mode", "produce", "produce or consume")
	topic := f.String("topic", "", "topic (partition 0)")
	n := f.Int64("n", 100000, "records")
	size := f.Int("size", 1024, "value bytes")
	acks := f.String("acks", "1", "1 or all (all: idempotent, kgo's default)")
	duration := f.Duration("duration", 20*time.Second, "time cap")
	ctx, cancel := f.parse(args)
	defer cancel()
	res := benchResult{Mode: *mode, SizeBytes: *size}
	var err error
	switch *mode {
	case "produce":
		err = benchProduce(ctx, f, &res, *topic, *n, *size, *acks, *duration)
	case "consume":
		err = benchConsume(ctx, f, &res, *topic, *n, *size, *duration)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		return err
	}
	emit(res)
	return nil
}

func benchProduce(ctx context.Context, f flags, res *benchResult, topic string, n int64, size int, acks string,
	duration time.Duration) error {
	opts := f.opts(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	switch acks {
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(5))
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	default:
		return fmt.Errorf("-acks %q: 1 or all", acks)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		return err
	}
	value := make([]byte, size)
	if _, err := rand.Read(value); err != nil {
		return err
	}
	var acked, failed atomic.Int64
	var firstErr atomic.Value
	promise := func(_ *kgo.Record, err error) {
		switch {
		case err == nil:
			acked.Add(1)
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			// still in flight at the time cap: not counted
		default:
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		}
	}
	start := time.Now()
	capCtx, stop := context.WithDeadline(ctx, start.Add(duration))
	defer stop()
	for i := int64(0); i < n && capCtx.Err() == nil; i++ {
		cl.Produce(capCtx, &kgo.Record{Value: value}, promise) // blocks while the client's buffer is full
	}
	flushErr := cl.Flush(capCtx)
	elapsed := time.Since(start)
	res.Records = acked.Load()
	if flushErr != nil || res.Records < n {
		res.Capped, elapsed = true, duration
	}
	res.Bytes = res.Records * int64(size)
	res.Failures = failed.Load()
	if e, ok := firstErr.Load().(string); ok {
		res.FirstErr = e
	}
	res.finish(elapsed)
	return nil
}

func benchConsume(ctx context.Context, f flags, res *benchResult, topic string, n int64, size int,
	duration time.Duration) error {
	cl, err := kgo.NewClient(f.opts(kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// the leader's address and the partition's end are known before the clock starts
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil || end.Offset < n {
		return fmt.Errorf("%s/0 ends at %d (%v), fewer than %d records", topic, end.Offset, end.Err, n)
	}
	start := time.Now()
	capCtx, stop := context.WithDeadline(ctx, start.Add(duration))
	defer stop()
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})
	for res.Records < n && capCtx.Err() == nil {
		fetches := cl.PollFetches(capCtx)
		if err := polled(capCtx, fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if len(r.Value) != size && res.FirstErr == "" {
				res.FirstErr = fmt.Sprintf("offset %d: %d value bytes, expected %d", r.Offset, len(r.Value), size)
				res.Failures++
			}
			res.Records++
			res.Bytes += int64(len(r.Value))
		})
	}
	elapsed := time.Since(start)
	if res.Records < n {
		res.Capped, elapsed = true, duration
	}
	res.finish(elapsed)
	return nil
}

// loopback measures one TCP stream over 127.0.0.1 for -duration: one goroutine writes 1 MiB buffers, another
// reads them into a 1 MiB buffer; the rate is the bytes received over the time until the reader saw EOF.
func loopback(args []string) error {
	f := newFlags("loopback")
	duration := f.Duration("duration", 3*time.Second, "how long to send")
	ctx, cancel := f.parse(args)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	var received int64
	var recvErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			recvErr = err
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(*duration + 10*time.Second))
		buf := make([]byte, 1<<20)
		for {
			k, err := conn.Read(buf)
			received += int64(k)
			if err != nil {
				if err != io.EOF {
					recvErr = err
				}
				return
			}
		}
	}()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	conn.SetDeadline(start.Add(*duration + 10*time.Second))
	for time.Since(start) < *duration {
		if _, err := conn.Write(buf); err != nil {
			return err
		}
	}
	conn.(*net.TCPConn).CloseWrite()
	wg.Wait()
	elapsed := time.Since(start)
	conn.Close()
	if recvErr != nil {
		return recvErr
	}
	res := benchResult{Mode: "loopback", Bytes: received}
	res.finish(elapsed)
	emit(res)
	return nil
}
