// Package redistest starts real redis-server processes for the Go
// module's tests: each on a free loopback port, in a temporary directory,
// with or without the redis-swl module (its path in SWL_MODULE, as make
// test sets it; otherwise the repository's release build), stopped when
// the test ends.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func ModulePath(t testing.TB) string {
	path := os.Getenv("SWL_MODULE")
	if path == "" {
		// This file is clients/go/internal/redistest/redistest.go.
		_, file, _, _ := runtime.Caller(0)
		path = filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "target", "release", "libredis_swl.so")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no module at %s (set SWL_MODULE, or build it: cargo build --release --lib in the repository): %v", path, err)
	}
	absolute, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return absolute
}

func FreePort(t testing.TB) int {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port
}

type Server struct {
	t      testing.TB
	Port   int
	Module bool
	// A connection of the test's own, for what it reads and sets up.
	Raw *redis.Client
}

// Start starts a server with the module (creating logs in encoding)
// or without it, with extra arguments, and stops it when the test ends.
func Start(t testing.TB, module bool, encoding string, extra ...string) *Server {
	t.Helper()
	return startWith(t, module, encoding, func() []string { return extra })
}

// startWith is Start with the extra arguments of each attempt from extra,
// which may pick ports of its own (anew for each attempt).
func startWith(t testing.TB, module bool, encoding string, extra func() []string) *Server {
	t.Helper()
	// A port found free may be taken by another test's server before this
	// one binds it: then this one exits, or the PING reaches the other,
	// which its process id tells. Either way, other ports (a cluster node's bus port too).
	for attempt := 1; ; attempt++ {
		s, err := start(t, module, encoding, extra())
		if err == nil {
			return s
		}
		if attempt == 5 {
			t.Fatal(err)
		}
	}
}

// start is one attempt of Start's, on a port found free.
func start(t testing.TB, module bool, encoding string, extra []string) (*Server, error) {
	port := FreePort(t)
	args := []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(),
	}
	if module {
		args = append(args, "--loadmodule", ModulePath(t), "--swl.encoding", encoding)
	}
	args = append(args, extra...)
	// REDIS_SERVER runs the tests on another server build (see the
	// README).
	server := os.Getenv("REDIS_SERVER")
	if server == "" {
		server = "redis-server"
	}
	cmd := exec.Command(server, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	s := &Server{t: t, Port: port, Module: module}
	s.Raw = redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = s.Raw.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := s.Raw.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if !strings.Contains(info, "\r\nprocess_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n") {
				return nil, fmt.Errorf("port %d answered from another redis-server", port)
			}
			return s, nil
		}
		select {
		case err := <-exited:
			exited <- err
			return nil, fmt.Errorf("redis-server %v exited: %v", args, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Server) Addr() string {
	return fmt.Sprintf("127.0.0.1:%d", s.Port)
}

// client is a go-redis client of the server, closed when the test ends.
func (s *Server) Client(options *redis.Options) *redis.Client {
	if options == nil {
		options = &redis.Options{}
	}
	options.Addr = s.Addr()
	client := redis.NewClient(options)
	s.t.Cleanup(func() { _ = client.Close() })
	return client
}

func (s *Server) Do(args ...any) any {
	s.t.Helper()
	reply, err := s.Raw.Do(context.Background(), args...).Result()
	if err != nil {
		s.t.Fatalf("%v: %v", args, err)
	}
	return reply
}

// entries is SWL.ENTRIES (or its FCALL) of key, read on the test's own
// connection.
func (s *Server) Entries(key string) []int64 {
	s.t.Helper()
	var reply any
	if s.Module {
		reply = s.Do("SWL.ENTRIES", key)
	} else {
		reply = s.Do("FCALL", "swl_entries", 1, key)
	}
	var times []int64
	for _, value := range reply.([]any) {
		times = append(times, value.(int64))
	}
	return times
}

// calls is how many times the server ran command (INFO commandstats'
// name: "swl.check", "fcall", "function|load"), and how many of those
// failed with an error.
func (s *Server) Calls(command string) (calls, failed int) {
	s.t.Helper()
	info := s.Do("INFO", "commandstats").(string)
	prefix := "cmdstat_" + command + ":"
	for _, line := range strings.Split(info, "\n") {
		rest, found := strings.CutPrefix(strings.TrimSpace(line), prefix)
		if !found {
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			name, value, _ := strings.Cut(field, "=")
			n, err := strconv.Atoi(value)
			switch {
			case name == "calls" && err == nil:
				calls = n
			case name == "failed_calls" && err == nil:
				failed = n
			}
		}
	}
	return calls, failed
}

// succeeded is how many times command ran without an error.
func (s *Server) Succeeded(command string) int {
	calls, failed := s.Calls(command)
	return calls - failed
}

// stall is the server stalled by DEBUG SLEEP, sent on a connection of its
// own before anything the test sends next: it then reads nothing and
// answers nothing, as a server busy with a long command or paused by its
// host. wait returns once it has woken and handled what arrived meanwhile.
type Stall struct {
	t       testing.TB
	conn    net.Conn
	replies *bufio.Reader
}

func (s *Server) Stall(seconds float64) *Stall {
	s.t.Helper()
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		s.t.Fatal(err)
	}
	st := &Stall{t: s.t, conn: conn, replies: bufio.NewReader(conn)}
	// Once it has answered, the server reads this connection as it reads
	// the others: a command sent on it now is read before one sent next on
	// another (a connection not yet accepted would be read later).
	st.Exchange("PING\r\n", "+PONG\r\n")
	st.Send(fmt.Sprintf("DEBUG SLEEP %g\r\n", seconds))
	return st
}

func (st *Stall) Send(command string) {
	if _, err := st.conn.Write([]byte(command)); err != nil {
		st.t.Fatal(err)
	}
}

func (st *Stall) Expect(reply string) {
	st.t.Helper()
	line, err := st.replies.ReadString('\n')
	if err != nil || line != reply {
		st.t.Fatalf("got %q (%v), not %q", line, err, reply)
	}
}

func (st *Stall) Exchange(command, reply string) {
	st.t.Helper()
	st.Send(command)
	st.Expect(reply)
}

func (st *Stall) Wait() {
	st.t.Helper()
	st.Expect("+OK\r\n")
	// Commands that came from other connections during the sleep were read
	// before this PING, which came after them.
	st.Exchange("PING\r\n", "+PONG\r\n")
	_ = st.conn.Close()
}

// StartCluster is three primaries, with the module or without it, with
// every slot assigned.
func StartCluster(t testing.TB, module bool) []*Server {
	t.Helper()
	nodes := make([]*Server, 3)
	addrs := make([]string, 3)
	for i := range nodes {
		nodes[i] = startWith(t, module, "compact", func() []string {
			return []string{"--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
				"--cluster-port", strconv.Itoa(FreePort(t))}
		})
		addrs[i] = nodes[i].Addr()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if output, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, output)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range nodes {
		for {
			info := node.Do("CLUSTER", "INFO").(string)
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

// Owner is the node of nodes (a cluster's) that serves key's slot, as
// CLUSTER SLOTS says.
func Owner(t testing.TB, nodes []*Server, key string) *Server {
	t.Helper()
	slot := nodes[0].Do("CLUSTER", "KEYSLOT", key).(int64)
	for _, r := range nodes[0].Do("CLUSTER", "SLOTS").([]any) {
		slots := r.([]any)
		first, last, primary := slots[0].(int64), slots[1].(int64), slots[2].([]any)
		if slot < first || slot > last {
			continue
		}
		for _, node := range nodes {
			if int64(node.Port) == primary[1].(int64) {
				return node
			}
		}
	}
	t.Fatalf("no node serves %s (slot %d)", key, slot)
	return nil
}

// ClusterClient is a go-redis cluster client of nodes, closed when the
// test ends.
func ClusterClient(t testing.TB, nodes []*Server) *redis.ClusterClient {
	addrs := make([]string, len(nodes))
	for i, node := range nodes {
		addrs[i] = node.Addr()
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// TB is the test the server belongs to.
func (s *Server) TB() testing.TB { return s.t }

// Setup is a server a test runs on: with the module, whose new logs take
// Encoding, or without it (the function library, whose new logs take the
// encoding the client loads it in, Encoding where the package lets the
// test choose).
type Setup struct {
	Module   bool
	Encoding string
}

func (s Setup) String() string {
	if s.Module {
		return "module/" + s.Encoding
	}
	return "library/" + s.Encoding
}

// Setups are the module in each encoding and the library in each.
var Setups = []Setup{{true, "zset"}, {true, "compact"}, {false, "zset"}, {false, "compact"}}

// Each runs test on a server of each of setups, in parallel.
func Each(t *testing.T, setups []Setup, test func(t *testing.T, setup Setup, s *Server)) {
	for _, setup := range setups {
		t.Run(setup.String(), func(t *testing.T) {
			t.Parallel()
			test(t, setup, Start(t, setup.Module, setup.Encoding))
		})
	}
}

// Clock is a test's time, set by hand, for what takes a func() time.Time.
type Clock struct{ ms atomic.Int64 }

// NewClock is a clock at ms, Unix milliseconds.
func NewClock(ms int64) *Clock {
	c := &Clock{}
	c.Set(ms)
	return c
}

func (c *Clock) Set(ms int64) { c.ms.Store(ms) }

func (c *Clock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }
