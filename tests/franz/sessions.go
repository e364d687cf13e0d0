package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchKey is the Fetch API's key: the hooks count only its requests and responses.
const fetchKey = 1

// fetchStats counts what a consumer's Fetch requests and responses weigh on the wire (kgo's broker hooks see
// every request written and every response read, with their sizes).
type fetchStats struct {
	requests, written, read atomic.Int64
}

func (s *fetchStats) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytesWritten int, _, _ time.Duration, err error) {
	if key == fetchKey && err == nil {
		s.requests.Add(1)
		s.written.Add(int64(bytesWritten))
	}
}

func (s *fetchStats) OnBrokerRead(_ kgo.BrokerMetadata, key int16, bytesRead int, _, _ time.Duration, err error) {
	if key == fetchKey && err == nil {
		s.read.Add(int64(bytesRead))
	}
}

func (s *fetchStats) reset() {
	s.requests.Store(0)
	s.written.Store(0)
	s.read.Store(0)
}

// sessionsResult is what sessions prints at the end of its measured window.
type sessionsResult struct {
	Sessions      bool    `json:"sessions"`
	Partitions    int     `json:"partitions"`
	Seconds       float64 `json:"seconds"`
	FetchRequests int64   `json:"fetch_requests"`
	RequestBytes  int64   `json:"request_bytes"`
	ResponseBytes int64   `json:"response_bytes"`
	Consumed      int64   `json:"consumed"`
	Produced      int64   `json:"produced"`
}

// sessions consumes every partition of -topic from its end while a second client produces -rate small
// records a second spread over the partitions: a consumer of many partitions with little traffic. After
// -warmup it prints {"phase": "measure"}, then after -duration the Fetch requests the consumer sent in that
// window and the bytes of those requests and their responses, with incremental fetch sessions (KIP-227,
// kgo's default) or, with -sessions=false, full fetches that name every partition every time.
func sessions(args []string) error {
	f := newFlags("sessions")
	topic := f.String("topic", "", "topic")
	partitions := f.Int("partitions", 1000, "partitions of -topic")
	useSessions := f.Bool("sessions", true, "incremental fetch sessions")
	rate := f.Int("rate", 100, "records a second produced meanwhile (spread over the partitions)")
	warmup := f.Duration("warmup", 5*time.Second, "consuming before the measured window")
	duration := f.Duration("duration", 20*time.Second, "the measured window")
	maxWait := f.Duration("max-wait", 500*time.Millisecond, "fetch max wait (the Java client's default)")
	ctx, cancel := f.parse(args)
	defer cancel()

	stats := &fetchStats{}
	opts := f.opts(kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchMaxWait(*maxWait), kgo.WithHooks(stats))
	if !*useSessions {
		opts = append(opts, kgo.DisableFetchSessions())
	}
	consumer, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer consumer.Close()
	producer, err := kgo.NewClient(f.opts(kgo.DefaultProduceTopic(*topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.ProducerLinger(0))...)
	if err != nil {
		return err
	}
	defer producer.Close()

	var produced, consumed atomic.Int64
	var produceErr atomic.Value
	prodCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		next, owed := 0, 0.0
		for {
			select {
			case <-prodCtx.Done():
				return
			case <-tick.C:
			}
			for owed += float64(*rate) / 100; owed >= 1; owed-- {
				r := &kgo.Record{Partition: int32(next % *partitions), Value: []byte("tick")}
				next++
				producer.Produce(prodCtx, r, func(_ *kgo.Record, err error) {
					if err != nil && prodCtx.Err() == nil {
						produceErr.CompareAndSwap(nil, err.Error())
					}
					produced.Add(1)
				})
			}
		}
	}()

	poll := func(until time.Time) error {
		for time.Now().Before(until) {
			pollCtx, done := context.WithDeadline(ctx, until)
			fetches := consumer.PollFetches(pollCtx)
			done()
			if err := polled(pollCtx, fetches); err != nil {
				return err
			}
			consumed.Add(int64(fetches.NumRecords()))
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	}
	if err := poll(time.Now().Add(*warmup)); err != nil {
		return err
	}
	stats.reset()
	produced.Store(0)
	consumed.Store(0)
	emit(map[string]string{"phase": "measure"})
	start := time.Now()
	if err := poll(start.Add(*duration)); err != nil {
		return err
	}
	elapsed := time.Since(start)
	if e := produceErr.Load(); e != nil {
		return fmt.Errorf("produce: %v", e)
	}
	emit(sessionsResult{Sessions: *useSessions, Partitions: *partitions, Seconds: elapsed.Seconds(),
		FetchRequests: stats.requests.Load(), RequestBytes: stats.written.Load(), ResponseBytes: stats.read.Load(),
		Consumed: consumed.Load(), Produced: produced.Load()})
	return nil
}
