package ulule_test

// ulule's own store tests (drivers/store/tests), on this store.

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/tests"

	"github.com/redis-swl/redis-swl/clients/go/ulule"
)

// 250,000 Gets from 500 goroutines, on the server's clock.
func TestUluleConcurrentAccess(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		tests.TestStoreConcurrentAccess(t, s.store(t, limiter.StoreOptions{Prefix: limiter.DefaultPrefix}))
	})
}

// sequentialChild names the run, in a child process, of ulule's sequential
// test: the setup, then the clock.
const sequentialChild = "SWL_ULULE_SEQUENTIAL_CHILD"

// The assertion of ulule's tests.TestStoreSequentialAccess (v3.11.2,
// drivers/store/tests/tests.go) that this store fails: is.False(lctx.Reached)
// of the Peek after the third Get. The log holds exactly the limit, and
// Reached says that a Get now would be refused. ulule's counter says
// Reached only once a request beyond the limit has been counted, which a
// sliding log that records no refused request cannot tell from a full one.
const reachedWhenFullLine = 52

// ulule's sequential test stops at its first failed assertion (testify's
// require), so it runs in a child process of this test binary, and this
// test checks where it stopped, on the server's clock and on a clock of
// whole seconds: at the Peek of a full log. A change of behaviour that
// made it fail elsewhere, or pass, fails this test.
func TestUluleSequentialAccessFailsOnlyWhereDocumented(t *testing.T) {
	if name := os.Getenv(sequentialChild); name != "" {
		runSequentialChild(t, name)
		return
	}
	trace := regexp.MustCompile(`Error Trace:\s+\S*/drivers/store/tests/tests\.go:(\d+)`)
	for _, setup := range setups {
		for _, clock := range []string{"server", "whole-seconds"} {
			name := setup.String() + "/" + clock
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				child := exec.Command(os.Args[0], "-test.run=^TestUluleSequentialAccessFailsOnlyWhereDocumented$", "-test.v")
				child.Env = append(os.Environ(), sequentialChild+"="+name)
				output, err := child.CombinedOutput()
				if _, failed := err.(*exec.ExitError); !failed {
					t.Fatalf("ulule's sequential test did not fail (%v):\n%s", err, output)
				}
				var lines []int
				for _, match := range trace.FindAllSubmatch(output, -1) {
					line, _ := strconv.Atoi(string(match[1]))
					lines = append(lines, line)
				}
				if len(lines) != 1 || lines[0] != reachedWhenFullLine {
					t.Fatalf("failed at lines %v of tests.go, not at %d alone:\n%s", lines, reachedWhenFullLine, output)
				}
				t.Logf("fails at tests.go:%d, as documented", lines[0])
			})
		}
	}
}

func runSequentialChild(t *testing.T, name string) {
	for _, setup := range setups {
		if name == setup.String()+"/server" || name == setup.String()+"/whole-seconds" {
			store := start(t, setup).store(t, limiter.StoreOptions{Prefix: limiter.DefaultPrefix})
			if name == setup.String()+"/whole-seconds" {
				ulule.SetClock(store, func() time.Time { return time.Now().Truncate(time.Second) })
			}
			tests.TestStoreSequentialAccess(t, store)
			return
		}
	}
	t.Fatalf("no setup %q", name)
}
