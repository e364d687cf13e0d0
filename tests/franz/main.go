// Command franz drives an odradek broker with franz-go (kgo and kadm) for tests/interop/test_franz.py and
// bench/native.py. Each subcommand prints JSON objects, one a line, on stdout; a failure goes to stderr
// with exit status 1. Every subcommand is bounded by -timeout.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var out = json.NewEncoder(os.Stdout)

// emit prints one JSON line.
func emit(v any) {
	if err := out.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "franz: stdout:", err)
		os.Exit(1)
	}
}

var commands = map[string]func([]string) error{
	"produce":  produce,
	"consume":  consume,
	"group":    group,
	"transact": transact,
	"admin":    admin,
	"bench":    bench,
	"loopback": loopback,
	"sessions": sessions,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		names := make([]string, 0, len(commands))
		for name := range commands {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: franz {%s} [flags]\n", strings.Join(names, "|"))
		os.Exit(2)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "franz %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// flags holds the options every subcommand takes.
type flags struct {
	*flag.FlagSet
	brokers *string
	timeout *time.Duration
}

func newFlags(name string) flags {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	return flags{fs, fs.String("brokers", "127.0.0.1:9092", "bootstrap address"),
		fs.Duration("timeout", 60*time.Second, "the whole subcommand's deadline")}
}

// parse parses args and returns a context that ends at the deadline.
func (f flags) parse(args []string) (context.Context, context.CancelFunc) {
	f.Parse(args) // ExitOnError
	return context.WithTimeout(context.Background(), *f.timeout)
}

func (f flags) opts(more ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(strings.Split(*f.brokers, ",")...),
		kgo.ClientID("odradek-franz"), kgo.FetchMaxWait(200 * time.Millisecond)}, more...)
}

// polled reports a poll's errors other than its context ending.
func polled(ctx context.Context, fetches kgo.Fetches) error {
	for _, e := range fetches.Errors() {
		if ctx.Err() == nil {
			return fmt.Errorf("fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
		}
	}
	return nil
}
