package ulule_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ulule/limiter/v3"

	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
	"github.com/redis-swl/redis-swl/clients/go/ulule"
)

// On a three-node cluster, from a go-redis cluster client as ulule's redis
// store takes one: each key's log on its own node, with the module or the
// function library (loaded on each primary).
func TestCluster(t *testing.T) {
	for _, module := range []bool{true, false} {
		t.Run(map[bool]string{true: "module", false: "library"}[module], func(t *testing.T) {
			t.Parallel()
			nodes := redistest.StartCluster(t, module)
			store, err := ulule.NewStoreWithOptions(redistest.ClusterClient(t, nodes), limiter.StoreOptions{Prefix: "api"})
			if err != nil {
				t.Fatal(err)
			}
			clock := redistest.NewClock(T)
			ulule.SetClock(store, clock.Now)
			rate := limiter.Rate{Period: time.Minute, Limit: 1}
			for user := range 12 {
				key := fmt.Sprintf("user%d", user)
				got, err := store.Get(ctx, key, rate)
				expect(t, got, err, lctx(1, 0, S+60, false))
				got, err = store.Get(ctx, key, rate)
				expect(t, got, err, lctx(1, 0, S+60, true))
				got, err = store.Peek(ctx, key, rate)
				expect(t, got, err, lctx(1, 0, S+60, true))
			}
			for _, node := range nodes {
				if keys := node.Do("DBSIZE"); keys == int64(0) {
					t.Fatalf("no log on %s", node.Addr())
				}
			}
			got, err := store.Reset(ctx, "user0", rate)
			expect(t, got, err, lctx(1, 1, S, false))
			got, err = store.Get(ctx, "user0", rate)
			expect(t, got, err, lctx(1, 0, S+60, false))
		})
	}
}
