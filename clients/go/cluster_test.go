package swl_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
	"github.com/redis-swl/redis-swl/clients/go/swlvalkey"
)

func startCluster(t *testing.T, module bool) []*server {
	var nodes []*server
	for _, node := range redistest.StartCluster(t, module) {
		nodes = append(nodes, &server{node})
	}
	return nodes
}

func clusterClient(t *testing.T, nodes []*server) redis.UniversalClient {
	var servers []*redistest.Server
	for _, node := range nodes {
		servers = append(servers, node.Server)
	}
	return redistest.ClusterClient(t, servers)
}

// Each primary is asked for its library's version on its own: loaded where
// it is missing, an older one replaced on request, a newer one kept; and
// checks go to each key's node, through the module or the library.
func TestCluster(t *testing.T) {
	clients := map[string]func(t *testing.T, nodes []*server) *swl.Client{
		"go-redis": func(t *testing.T, nodes []*server) *swl.Client {
			return swl.New(swl.GoRedis(clusterClient(t, nodes)))
		},
		"valkey-go": func(t *testing.T, nodes []*server) *swl.Client {
			vk, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{nodes[0].Addr()}, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(vk.Close)
			return swl.New(swlvalkey.Adapt(vk))
		},
	}
	for adapter, clientOf := range clients {
		for _, module := range []bool{true, false} {
			name := adapter + "/" + map[bool]string{true: "module", false: "library"}[module]
			t.Run(name, func(t *testing.T) { testCluster(t, module, clientOf) })
		}
	}
}

func testCluster(t *testing.T, module bool, clientOf func(t *testing.T, nodes []*server) *swl.Client) {
	t.Parallel()
	nodes := startCluster(t, module)
	client := clientOf(t, nodes)
	if !module {
		newer := libraryOf(t, "9.9.9")
		nodes[0].Do("FUNCTION", "LOAD", newer)
		nodes[1].Do("FUNCTION", "LOAD", libraryOf(t, "0.0.1"))
		versions := func() string {
			return fmt.Sprint(nodes[0].loadedVersion(), nodes[1].loadedVersion(), nodes[2].loadedVersion())
		}
		own := swl.LibraryVersion()
		if err := client.LoadLibrary(ctx, false); err != nil {
			t.Fatal(err)
		}
		if got, want := versions(), fmt.Sprint("9.9.9", "0.0.1", own); got != want {
			t.Fatalf("%s, not %s", got, want)
		}
		if err := client.LoadLibrary(ctx, true); err != nil {
			t.Fatal(err)
		}
		if got, want := versions(), fmt.Sprint("9.9.9", own, own); got != want {
			t.Fatalf("%s, not %s", got, want)
		}
		if nodes[0].loadedCode() != newer {
			t.Fatal("the newer library was replaced")
		}
	}
	owners := map[int]bool{}
	for user := range 12 {
		key := fmt.Sprintf("rl:user%d", user)
		for i, allowed := range []bool{true, false} {
			v, err := client.Check(ctx, key, time.Minute, 1, swl.NowMs(T))
			expect(t, v, err, verdict(allowed, 1, 0, map[bool]int64{true: -1, false: 60_000}[allowed], 60_000, 60_000))
			if i == 0 {
				owners[owner(t, nodes, key)] = true
			}
		}
		if got, err := client.Entries(ctx, key); err != nil || len(got) != 1 {
			t.Fatalf("%v %v", got, err)
		}
	}
	if len(owners) != 3 || client.UsesLibrary() == module {
		t.Fatalf("owners %v, library %v", owners, client.UsesLibrary())
	}
}

// owner is the port of the node that holds key.
func owner(t *testing.T, nodes []*server, key string) int {
	slot := nodes[0].Do("CLUSTER", "KEYSLOT", key).(int64)
	for _, node := range nodes {
		if n, err := node.Raw.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", slot).Int64(); err == nil && n > 0 {
			return node.Port
		}
	}
	t.Fatalf("no node holds %s", key)
	return 0
}
