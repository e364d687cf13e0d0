package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// transact is a consume-transform-produce loop in a GroupTransactSession: records of -in (read_committed,
// group -group) become "out:<value>" records of -out on the same partition, with the input offsets
// committed in the same transaction. The first -abort transactions are aborted (the session then
// rewinds to the committed offsets, so their records are transformed again). It stops once -n input
// records are committed and prints one line per transaction, then the totals.
func transact(args []string) error {
	f := newFlags("transact")
	in := f.String("in", "", "input topic")
	outTopic := f.String("out", "", "output topic")
	groupID := f.String("group", "", "group id")
	txnID := f.String("txn-id", "", "transactional id")
	n := f.Int("n", 10, "input records to commit")
	abort := f.Int("abort", 0, "abort this many transactions first")
	ctx, cancel := f.parse(args)
	defer cancel()
	s, err := kgo.NewGroupTransactSession(f.opts(kgo.TransactionalID(*txnID), kgo.ConsumerGroup(*groupID),
		kgo.ConsumeTopics(*in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.SessionTimeout(10*time.Second), kgo.TransactionTimeout(30*time.Second))...)
	if err != nil {
		return err
	}
	defer s.Close()
	done, aborted := 0, 0
	for txn := 0; done < *n; txn++ {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := s.PollFetches(pctx)
		err := polled(pctx, fetches)
		cancel()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d records committed: %w", done, *n, ctx.Err())
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var produceErr error
		for _, r := range recs {
			wg.Add(1)
			s.Produce(ctx, &kgo.Record{Topic: *outTopic, Partition: r.Partition, Key: r.Key,
				Value: append([]byte("out:"), r.Value...)}, func(_ *kgo.Record, err error) {
				mu.Lock()
				if err != nil && produceErr == nil {
					produceErr = err
				}
				mu.Unlock()
				wg.Done()
			})
		}
		// flushed before End, so an aborted transaction's records are in the log too (End(TryAbort)
		// would otherwise drop them unsent)
		if err := s.Client().Flush(ctx); err != nil {
			return err
		}
		wg.Wait()
		if produceErr != nil {
			return produceErr
		}
		try := kgo.TryCommit
		if aborted < *abort {
			try = kgo.TryAbort
		}
		committed, err := s.End(ctx, try)
		if err != nil {
			return err
		}
		if committed {
			done += len(recs)
		} else if try == kgo.TryAbort {
			aborted++
		}
		emit(map[string]any{"txn": txn, "records": len(recs), "first_offset": recs[0].Offset, "committed": committed})
	}
	emit(map[string]int{"committed_records": done, "aborted_txns": aborted})
	return nil
}
