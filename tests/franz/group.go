package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// member is one consumer of the group: it polls, commits what it polled, and only then lets a rebalance
// go on (BlockRebalanceOnPoll), so a partition it gives up resumes exactly after its last record.
type member struct {
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
	revoked  [][]int32 // each revocation's partitions: cooperative rebalancing revokes only what moves
	records  [][3]any  // partition, offset, value
	err      error
	stop     chan struct{}
	done     chan struct{}
}

func newMember(f flags, topic, group string) (*member, error) {
	m := &member{assigned: map[int32]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	set := func(to, revoke bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if revoke && len(parts[topic]) > 0 { // kgo also calls it with nothing revoked
				m.revoked = append(m.revoked, sorted(parts[topic]))
			}
			for _, p := range parts[topic] {
				if to {
					m.assigned[p] = true
				} else {
					delete(m.assigned, p)
				}
			}
		}
	}
	cl, err := kgo.NewClient(f.opts(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(set(true, false)), kgo.OnPartitionsRevoked(set(false, true)),
		kgo.OnPartitionsLost(set(false, false)))...)
	m.cl = cl
	return m, err
}

func (m *member) run(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		select {
		case <-m.stop:
			return
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fetches := m.cl.PollFetches(pctx)
		err := polled(pctx, fetches)
		cancel()
		recs := fetches.Records()
		if err == nil && len(recs) > 0 {
			err = m.cl.CommitRecords(ctx, recs...)
		}
		m.mu.Lock()
		for _, r := range recs {
			m.records = append(m.records, [3]any{r.Partition, r.Offset, string(r.Value)})
		}
		if err != nil && m.err == nil {
			m.err = err
		}
		m.mu.Unlock()
		m.cl.AllowRebalance()
	}
}

// state returns the member's partitions (sorted), how many records it has, and its first error.
func (m *member) state() ([]int32, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := make([]int32, 0, len(m.assigned))
	for p := range m.assigned {
		parts = append(parts, p)
	}
	return sorted(parts), len(m.records), m.err
}

func (m *member) revocations() [][]int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]int32{}, m.revoked...)
}

func sorted(parts []int32) []int32 {
	out := append([]int32{}, parts...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// waitFor polls cond every 50 ms until it holds, a member fails or ctx ends.
func waitFor(ctx context.Context, what string, cond func() bool, members ...*member) error {
	for {
		for _, m := range members {
			if _, _, err := m.state(); err != nil {
				return fmt.Errorf("while waiting for %s: %w", what, err)
			}
		}
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// group runs two cooperative-sticky members a and b of -group on -topic (-partitions partitions): a
// joins, then b, and they split the partitions; -n records are produced and read; b leaves and a takes
// over its partitions; -n more are produced and read. It prints each phase's assignment, then every
// member's records.
func group(args []string) error {
	f := newFlags("group")
	topic := f.String("topic", "", "topic")
	groupID := f.String("group", "", "group id")
	partitions := f.Int("partitions", 4, "the topic's partitions")
	n := f.Int("n", 40, "records produced in each phase")
	ctx, cancel := f.parse(args)
	defer cancel()
	producer, err := kgo.NewClient(f.opts(kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	defer producer.Close()
	phase := func(name string) error {
		for i := 0; i < *n; i++ {
			r := &kgo.Record{Topic: *topic, Partition: int32(i % *partitions), Value: []byte(fmt.Sprintf("%s-%d", name, i))}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				return err
			}
		}
		return nil
	}
	a, err := newMember(f, *topic, *groupID)
	if err != nil {
		return err
	}
	defer a.cl.Close()
	go a.run(ctx)
	all := func(m *member) func() bool {
		return func() bool { parts, _, _ := m.state(); return len(parts) == *partitions }
	}
	if err := waitFor(ctx, "a alone assigned every partition", all(a), a); err != nil {
		return err
	}
	b, err := newMember(f, *topic, *groupID)
	if err != nil {
		return err
	}
	go b.run(ctx)
	split := func() bool {
		pa, _, _ := a.state()
		pb, _, _ := b.state()
		seen := map[int32]bool{}
		for _, p := range append(pa, pb...) {
			seen[p] = true
		}
		return len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == *partitions && len(seen) == *partitions
	}
	if err := waitFor(ctx, "a and b splitting the partitions", split, a, b); err != nil {
		return err
	}
	pa, _, _ := a.state()
	pb, _, _ := b.state()
	described, err := kadm.NewClient(producer).DescribeGroups(ctx, *groupID)
	if err != nil {
		return err
	}
	d := described[*groupID]
	emit(map[string]any{"event": "split", "a": pa, "b": pb, "a_revoked": a.revocations(), "state": d.State,
		"protocol": d.Protocol, "members": len(d.Members)})
	count := func(target int) func() bool {
		return func() bool { _, na, _ := a.state(); _, nb, _ := b.state(); return na+nb >= target }
	}
	if err := phase("one"); err != nil {
		return err
	}
	if err := waitFor(ctx, "phase one's records", count(*n), a, b); err != nil {
		return err
	}
	close(b.stop)
	<-b.done
	b.cl.Close() // leaves the group
	if err := waitFor(ctx, "a taking over every partition", all(a), a); err != nil {
		return err
	}
	pa, _, _ = a.state()
	emit(map[string]any{"event": "rebalanced", "a": pa, "a_revoked": a.revocations()})
	if err := phase("two"); err != nil {
		return err
	}
	if err := waitFor(ctx, "phase two's records", count(2**n), a); err != nil {
		return err
	}
	close(a.stop)
	<-a.done
	for name, m := range map[string]*member{"a": a, "b": b} {
		m.mu.Lock()
		emit(map[string]any{"event": "records", "member": name, "records": m.records})
		m.mu.Unlock()
	}
	return nil
}
