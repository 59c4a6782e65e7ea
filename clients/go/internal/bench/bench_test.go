// Package bench measures the Go module's ulule/limiter store against
// ulule's own Redis store, in one run on real servers: server time per
// check (INFO commandstats), and the time a caller waits. make bench runs
//
//	go test ./internal/bench -run '^$' -bench . -benchtime 1x
//
// and prints the table; "vs ulule" is how many times less time ours takes
// (above 1 is better).
package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
	"github.com/redis-swl/redis-swl/clients/go/ulule"
)

// calls is how many checks each row makes, one after another on one key.
const calls = 20_000

// workload is one way of calling: a rate, and what it does to the calls.
type workload struct {
	name string
	rate limiter.Rate
}

var workloads = []workload{
	// Every call admitted: a log that grows to `calls` entries.
	{"admitted (log growing to 20,000)", limiter.Rate{Period: time.Hour, Limit: 1_000_000}},
	// 100 admitted, then every call refused with the log full.
	{"denied (100 an hour, log full)", limiter.Rate{Period: time.Hour, Limit: 100}},
}

// measure makes `calls` checks on a new key of store and returns the
// server's time per check and the caller's.
func measure(b *testing.B, server *redistest.Server, store limiter.Store, rate limiter.Rate, key string) (perCheck, caller time.Duration) {
	ctx := context.Background()
	// The first call probes and loads what it needs (a script, the
	// library): not part of a check in steady use.
	if _, err := store.Get(ctx, key+":warm-up", rate); err != nil {
		b.Fatal(err)
	}
	server.Do("CONFIG", "RESETSTAT")
	start := time.Now()
	for range calls {
		if _, err := store.Get(ctx, key, rate); err != nil {
			b.Fatal(err)
		}
	}
	caller = time.Since(start) / calls
	return time.Duration(serverMicroseconds(b, server)*1000/calls) * time.Nanosecond, caller
}

// serverMicroseconds is the time the server spent in commands since
// CONFIG RESETSTAT, INFO's own call left out.
func serverMicroseconds(b *testing.B, server *redistest.Server) float64 {
	info := server.Do("INFO", "commandstats").(string)
	total := 0.0
	for _, line := range strings.Split(info, "\n") {
		name, rest, found := strings.Cut(strings.TrimSpace(line), ":")
		if !found || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			if value, found := strings.CutPrefix(field, "usec="); found {
				usec, err := strconv.ParseFloat(value, 64)
				if err != nil {
					b.Fatalf("%s: %v", line, err)
				}
				total += usec
			}
		}
	}
	return total
}

func BenchmarkStores(b *testing.B) {
	withModule := redistest.Start(b, true, "compact")
	libraryOnly := redistest.Start(b, false, "")
	stores := []struct {
		name   string
		server *redistest.Server
		make   func(s *redistest.Server) (limiter.Store, error)
	}{
		{"ulule's redis store", withModule, func(s *redistest.Server) (limiter.Store, error) {
			return ululeredis.NewStore(s.Client(nil))
		}},
		{"redis-swl, module", withModule, func(s *redistest.Server) (limiter.Store, error) {
			return ulule.NewStore(s.Client(nil))
		}},
		{"redis-swl, library", libraryOnly, func(s *redistest.Server) (limiter.Store, error) {
			return ulule.NewStore(s.Client(nil))
		}},
	}
	for range b.N {
		fmt.Printf("\nGo: ulule/limiter stores, %d checks one after another on one key\n", calls)
		fmt.Printf("%-56s %12s %12s %10s\n", "workload, store", "server us", "caller us", "vs ulule")
		for i, w := range workloads {
			var baseline time.Duration
			for j, s := range stores {
				store, err := s.make(s.server)
				if err != nil {
					b.Fatal(err)
				}
				server, caller := measure(b, s.server, store, w.rate, fmt.Sprintf("bench:%d:%d", i, j))
				if j == 0 {
					baseline = server
				}
				fmt.Printf("%-56s %12.2f %12.1f %10.2f\n", w.name+", "+s.name, us(server), us(caller),
					float64(baseline)/float64(server))
			}
		}
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
