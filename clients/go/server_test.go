package swl_test

// Real redis-server processes for the tests: each on a free loopback port,
// in a temporary directory, with or without the redis-swl module (its path
// in SWL_MODULE, as make test sets it; otherwise the repository's release
// build), stopped when the test ends.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// T is the tests' time: 2023-11-14, Unix milliseconds.
const T int64 = 1_700_000_000_000

// encodings are the encodings where behaviour is checked: the module's
// swl.encoding, or the library's WithEncoding.
var encodings = []swl.Encoding{swl.Zset, swl.Compact}

func modulePath(t testing.TB) string {
	path := os.Getenv("SWL_MODULE")
	if path == "" {
		path = filepath.Join("..", "..", "target", "release", "libredis_swl.so")
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

func freePort(t testing.TB) int {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port
}

type server struct {
	t      testing.TB
	port   int
	module bool
	// A connection of the test's own, for what it reads and sets up.
	raw *redis.Client
}

// startServer starts a server with the module (creating logs in encoding)
// or without it, with extra arguments, and stops it when the test ends.
func startServer(t testing.TB, module bool, encoding swl.Encoding, extra ...string) *server {
	t.Helper()
	port := freePort(t)
	args := []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(),
	}
	if module {
		args = append(args, "--loadmodule", modulePath(t), "--swl.encoding", encoding.String())
	}
	args = append(args, extra...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	s := &server{t: t, port: port, module: module}
	s.raw = redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = s.raw.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.raw.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s
		}
		select {
		case err := <-exited:
			t.Fatalf("redis-server %v exited: %v", args, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer PING: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *server) addr() string {
	return fmt.Sprintf("127.0.0.1:%d", s.port)
}

// client is a go-redis client of the server, closed when the test ends.
func (s *server) client(options *redis.Options) *redis.Client {
	if options == nil {
		options = &redis.Options{}
	}
	options.Addr = s.addr()
	client := redis.NewClient(options)
	s.t.Cleanup(func() { _ = client.Close() })
	return client
}

// swl is a redis-swl client over a go-redis client with default settings.
func (s *server) swl(options ...swl.Option) *swl.Client {
	return swl.New(swl.GoRedis(s.client(nil)), options...)
}

func (s *server) do(args ...any) any {
	s.t.Helper()
	reply, err := s.raw.Do(context.Background(), args...).Result()
	if err != nil {
		s.t.Fatalf("%v: %v", args, err)
	}
	return reply
}

// entries is SWL.ENTRIES (or its FCALL) of key, read on the test's own
// connection.
func (s *server) entries(key string) []int64 {
	s.t.Helper()
	var reply any
	if s.module {
		reply = s.do("SWL.ENTRIES", key)
	} else {
		reply = s.do("FCALL", "swl_entries", 1, key)
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
func (s *server) calls(command string) (calls, failed int) {
	s.t.Helper()
	info := s.do("INFO", "commandstats").(string)
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
func (s *server) succeeded(command string) int {
	calls, failed := s.calls(command)
	return calls - failed
}

// stall is the server stalled by DEBUG SLEEP, sent on a connection of its
// own before anything the test sends next: it then reads nothing and
// answers nothing, as a server busy with a long command or paused by its
// host. wait returns once it has woken and handled what arrived meanwhile.
type stall struct {
	t       testing.TB
	conn    net.Conn
	replies *bufio.Reader
}

func (s *server) stall(seconds float64) *stall {
	s.t.Helper()
	conn, err := net.Dial("tcp", s.addr())
	if err != nil {
		s.t.Fatal(err)
	}
	st := &stall{t: s.t, conn: conn, replies: bufio.NewReader(conn)}
	// Once it has answered, the server reads this connection as it reads
	// the others: a command sent on it now is read before one sent next on
	// another (a connection not yet accepted would be read later).
	st.exchange("PING\r\n", "+PONG\r\n")
	st.send(fmt.Sprintf("DEBUG SLEEP %g\r\n", seconds))
	return st
}

func (st *stall) send(command string) {
	if _, err := st.conn.Write([]byte(command)); err != nil {
		st.t.Fatal(err)
	}
}

func (st *stall) expect(reply string) {
	st.t.Helper()
	line, err := st.replies.ReadString('\n')
	if err != nil || line != reply {
		st.t.Fatalf("got %q (%v), not %q", line, err, reply)
	}
}

func (st *stall) exchange(command, reply string) {
	st.t.Helper()
	st.send(command)
	st.expect(reply)
}

func (st *stall) wait() {
	st.t.Helper()
	st.expect("+OK\r\n")
	// Commands that came from other connections during the sleep were read
	// before this PING, which came after them.
	st.exchange("PING\r\n", "+PONG\r\n")
	_ = st.conn.Close()
}

// each runs test on a server with the module and on one without, in each
// of the encodings.
func each(t *testing.T, test func(t *testing.T, s *server, client *swl.Client)) {
	for _, module := range []bool{true, false} {
		for _, encoding := range encodings {
			name := "library"
			if module {
				name = "module"
			}
			t.Run(name+"/"+encoding.String(), func(t *testing.T) {
				t.Parallel()
				s := startServer(t, module, encoding)
				test(t, s, s.swl(swl.WithEncoding(encoding)))
			})
		}
	}
}
