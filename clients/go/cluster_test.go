package swl_test

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// startCluster is three primaries with every slot assigned.
func startCluster(t *testing.T, module bool) []*server {
	nodes := make([]*server, 3)
	addrs := make([]string, 3)
	for i := range nodes {
		nodes[i] = startServer(t, module, swl.Compact, "--cluster-enabled", "yes",
			"--cluster-node-timeout", "5000", "--cluster-port", strconv.Itoa(freePort(t)))
		addrs[i] = nodes[i].addr()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if output, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, output)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range nodes {
		for {
			info := node.do("CLUSTER", "INFO").(string)
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the cluster did not come up")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nodes
}

func clusterClient(t *testing.T, nodes []*server) redis.UniversalClient {
	addrs := make([]string, len(nodes))
	for i, node := range nodes {
		addrs[i] = node.addr()
	}
	// Several addresses: a *redis.ClusterClient.
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs})
	t.Cleanup(func() { _ = client.Close() })
	if _, ok := client.(*redis.ClusterClient); !ok {
		t.Fatalf("a %T", client)
	}
	return client
}

// Each primary is asked for its library's version on its own: loaded where
// it is missing, an older one replaced on request, a newer one kept; and
// checks go to each key's node, through the module or the library.
func TestCluster(t *testing.T) {
	for _, module := range []bool{true, false} {
		t.Run(map[bool]string{true: "module", false: "library"}[module], func(t *testing.T) {
			t.Parallel()
			nodes := startCluster(t, module)
			client := swl.New(swl.GoRedis(clusterClient(t, nodes)))
			if !module {
				newer := libraryOf(t, "9.9.9")
				nodes[0].do("FUNCTION", "LOAD", newer)
				nodes[1].do("FUNCTION", "LOAD", libraryOf(t, "0.0.1"))
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
		})
	}
}

// owner is the port of the node that holds key.
func owner(t *testing.T, nodes []*server, key string) int {
	slot := nodes[0].do("CLUSTER", "KEYSLOT", key).(int64)
	for _, node := range nodes {
		if n, err := node.raw.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", slot).Int64(); err == nil && n > 0 {
			return node.port
		}
	}
	t.Fatalf("no node holds %s", key)
	return 0
}
