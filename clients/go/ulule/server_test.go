package ulule_test

// Real redis-server processes for the tests, from internal/redistest, and
// the stores the tests make on them.

import (
	"context"
	"testing"

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

// setups are where the tests run (redistest.Setups): the module in each
// encoding, and the function library loaded in each.
var setups = redistest.Setups

// server is a started setup.
type server struct {
	*redistest.Server
	setup redistest.Setup
}

func start(t testing.TB, s redistest.Setup) *server {
	t.Helper()
	return &server{redistest.Start(t, s.Module, s.Encoding), s}
}

// each runs test in every setup, in parallel.
func each(t *testing.T, test func(t *testing.T, s *server)) {
	redistest.Each(t, setups, func(t *testing.T, setup redistest.Setup, s *redistest.Server) {
		test(t, &server{s, setup})
	})
}

// store is a store on the server as its users make one: with the module,
// from a go-redis client; without it, from a redis-swl client that loads
// the library in the setup's encoding (NewStoreWithOptions would load it
// in the default, compact).
func (s *server) store(t testing.TB, options limiter.StoreOptions) limiter.Store {
	t.Helper()
	rdb := s.Client(nil)
	if !s.setup.Module {
		encoding := map[string]swl.Encoding{"zset": swl.Zset, "compact": swl.Compact}[s.setup.Encoding]
		return ulule.NewStoreFromClient(swl.New(swl.GoRedis(rdb), swl.WithEncoding(encoding)), options)
	}
	store, err := ulule.NewStoreWithOptions(rdb, options)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// clock is a store's clock in the tests, set by hand.
type clock = redistest.Clock

// storeAt is a store with ulule's default prefix whose calls are made at
// the clock's time, which starts at T.
func (s *server) storeAt(t testing.TB) (limiter.Store, *clock) {
	t.Helper()
	store := s.store(t, limiter.StoreOptions{Prefix: limiter.DefaultPrefix})
	c := redistest.NewClock(T)
	ulule.SetClock(store, c.Now)
	return store, c
}
