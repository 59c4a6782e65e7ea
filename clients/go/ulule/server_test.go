package ulule_test

// Real redis-server processes for the tests, from internal/redistest, and
// the stores the tests make on them.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ulule/limiter/v3"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
	"github.com/redis-swl/redis-swl/clients/go/ulule"
)

var ctx = context.Background()

// T is the tests' time, Unix milliseconds: 2023-11-14T22:13:20Z, a whole
// second, S in Unix seconds.
const (
	T int64 = 1_700_000_000_000
	S int64 = T / 1000
)

// setup is where a test runs: a server with the module or without it (the
// function library), and the encoding its new logs take.
type setup struct {
	module   bool
	encoding swl.Encoding
}

func (s setup) String() string {
	if s.module {
		return "module/" + s.encoding.String()
	}
	return "library/" + s.encoding.String()
}

var setups = []setup{
	{module: true, encoding: swl.Zset},
	{module: true, encoding: swl.Compact},
	{module: false, encoding: swl.Zset},
	{module: false, encoding: swl.Compact},
}

// server is a started setup.
type server struct {
	*redistest.Server
	setup
}

func start(t testing.TB, s setup) *server {
	t.Helper()
	return &server{redistest.Start(t, s.module, s.encoding.String()), s}
}

// each runs test in every setup, in parallel.
func each(t *testing.T, test func(t *testing.T, s *server)) {
	for _, setup := range setups {
		t.Run(setup.String(), func(t *testing.T) {
			t.Parallel()
			test(t, start(t, setup))
		})
	}
}

// store is a store on the server as its users make one: with the module,
// from a go-redis client; without it, from a redis-swl client that loads
// the library in the setup's encoding (NewStoreWithOptions would load it
// in the default, compact).
func (s *server) store(t testing.TB, options limiter.StoreOptions) limiter.Store {
	t.Helper()
	rdb := s.Client(nil)
	if !s.module {
		return ulule.NewStoreFromClient(swl.New(swl.GoRedis(rdb), swl.WithEncoding(s.encoding)), options)
	}
	store, err := ulule.NewStoreWithOptions(rdb, options)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// clock is a store's clock in the tests, set by hand.
type clock struct{ ms atomic.Int64 }

func (c *clock) set(ms int64) { c.ms.Store(ms) }

func (c *clock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

// storeAt is a store with ulule's default prefix whose calls are made at
// the clock's time, which starts at T.
func (s *server) storeAt(t testing.TB) (limiter.Store, *clock) {
	t.Helper()
	store := s.store(t, limiter.StoreOptions{Prefix: limiter.DefaultPrefix})
	c := &clock{}
	c.set(T)
	ulule.SetClock(store, c.now)
	return store, c
}
