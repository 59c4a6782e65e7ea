package swl_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

var ctx = context.Background()

// verdict is the Verdict of a reply of six integers.
func verdict(allowed bool, limit, remaining, retryMs, resetMs, windowMs int64) swl.Verdict {
	return swl.Verdict{
		Allowed:    allowed,
		Limit:      limit,
		Remaining:  remaining,
		RetryAfter: time.Duration(retryMs) * time.Millisecond,
		ResetAfter: time.Duration(resetMs) * time.Millisecond,
		Window:     time.Duration(windowMs) * time.Millisecond,
	}
}

func expect(t *testing.T, got swl.Verdict, err error, want swl.Verdict) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func expectEntries(t *testing.T, client *swl.Client, key string, want ...int64) {
	t.Helper()
	got, err := client.Entries(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
}

// The tour of docs/commands.md, reply by reply.
func TestTour(t *testing.T) {
	each(t, func(t *testing.T, s *server, client *swl.Client) {
		v, err := client.Check(ctx, "rl:bob", 10*time.Minute, 5, swl.NowMs(T), swl.Cost(2))
		expect(t, v, err, verdict(true, 5, 3, -1, 600_000, 600_000))
		expectEntries(t, client, "rl:bob", T, T)

		v, err = client.Peek(ctx, "rl:bob", 10*time.Minute, 5, swl.NowMs(T+30_000), swl.Cost(4))
		expect(t, v, err, verdict(false, 5, 3, 570_000, 570_000, 600_000))
		seconds, ok := v.RetryAfterSeconds()
		if !ok || seconds != 570 {
			t.Fatalf("RetryAfterSeconds %d %v", seconds, ok)
		}

		v, err = client.Check(ctx, "rl:bob", 10*time.Minute, 5, swl.NowMs(T+30_000), swl.Window(10*time.Second, 1))
		expect(t, v, err, verdict(true, 1, 0, -1, 600_000, 10_000))
		if _, ok := v.RetryAfterSeconds(); ok {
			t.Fatal("a retry after an admission")
		}
		expectEntries(t, client, "rl:bob", T, T, T+30_000)

		// OLDEST: the two spent at T leave at T+600000.
		v, err = client.Peek(ctx, "rl:bob", 10*time.Minute, 5, swl.At(time.UnixMilli(T+30_000)), swl.Oldest())
		want := verdict(true, 5, 1, -1, 600_000, 600_000)
		want.OldestAfter, want.HasOldestAfter = 570_000*time.Millisecond, true
		expect(t, v, err, want)

		if s.Module == client.UsesLibrary() {
			t.Fatalf("module %v, uses the library %v", s.Module, client.UsesLibrary())
		}
	})
}

func TestRefund(t *testing.T) {
	each(t, func(t *testing.T, s *server, client *swl.Client) {
		v, err := client.Check(ctx, "rl:erin", time.Minute, 3, swl.NowMs(T), swl.Cost(2))
		expect(t, v, err, verdict(true, 3, 1, -1, 60_000, 60_000))
		v, err = client.Refund(ctx, "rl:erin", time.Minute, 3, swl.NowMs(T+5_000))
		expect(t, v, err, verdict(true, 3, 1, -1, 60_000, 60_000))
		expectEntries(t, client, "rl:erin", T)
		// More than is left: the log is emptied and deleted.
		v, err = client.Refund(ctx, "rl:erin", time.Minute, 3, swl.NowMs(T+5_000), swl.Cost(5))
		expect(t, v, err, verdict(false, 3, 3, -1, 0, 60_000))
		expectEntries(t, client, "rl:erin")
		if n := s.Do("EXISTS", "rl:erin").(int64); n != 0 {
			t.Fatal("an emptied log is kept")
		}
	})
}

func TestCostAndDenials(t *testing.T) {
	each(t, func(t *testing.T, s *server, client *swl.Client) {
		v, err := client.Check(ctx, "k", time.Second, 5, swl.NowMs(T), swl.Cost(3))
		expect(t, v, err, verdict(true, 5, 2, -1, 1_000, 1_000))
		v, err = client.Check(ctx, "k", time.Second, 5, swl.NowMs(T+100), swl.Cost(3))
		// k = 3 + 3 - 5 = 1: the first entry, at T, leaves at T+1000.
		expect(t, v, err, verdict(false, 5, 2, 900, 900, 1_000))
		seconds, ok := v.RetryAfterSeconds()
		if !ok || seconds != 1 {
			t.Fatalf("RetryAfterSeconds %d %v", seconds, ok)
		}
		// A cost above the limit: waiting cannot help.
		v, err = client.Check(ctx, "k", time.Second, 5, swl.NowMs(T+100), swl.Cost(6))
		expect(t, v, err, verdict(false, 5, 2, -1, 900, 1_000))
		if _, ok := v.RetryAfterSeconds(); ok {
			t.Fatal("a wait that cannot help")
		}
		expectEntries(t, client, "k", T, T, T)
	})
}

func TestTwoWindows(t *testing.T) {
	each(t, func(t *testing.T, s *server, client *swl.Client) {
		// 100 a minute and 2 a second.
		check := func(at int64) (swl.Verdict, error) {
			return client.Check(ctx, "k", time.Minute, 100, swl.NowMs(at), swl.Window(time.Second, 2))
		}
		v, err := check(T)
		expect(t, v, err, verdict(true, 2, 1, -1, 60_000, 1_000))
		v, err = check(T + 10)
		expect(t, v, err, verdict(true, 2, 0, -1, 60_000, 1_000))
		v, err = check(T + 20)
		expect(t, v, err, verdict(false, 2, 0, 980, 59_990, 1_000))
		v, err = check(T + 1_000)
		expect(t, v, err, verdict(true, 2, 0, -1, 60_000, 1_000))
		expectEntries(t, client, "k", T, T+10, T+1_000)
		// The minute binds once it has less left than the second.
		v, err = client.Peek(ctx, "k", time.Minute, 3, swl.NowMs(T+5_000), swl.Window(time.Second, 2))
		expect(t, v, err, verdict(false, 3, 0, 55_000, 56_000, 60_000))
	})
}

func TestPenalize(t *testing.T) {
	each(t, func(t *testing.T, s *server, client *swl.Client) {
		for _, at := range []int64{T, T + 1} {
			v, err := client.Check(ctx, "k", time.Second, 2, swl.NowMs(at), swl.Penalize())
			expect(t, v, err, verdict(true, 2, 2-(at-T+1), -1, 1_000, 1_000))
		}
		// Denied and recorded, the log capped to the limit: T is dropped.
		v, err := client.Check(ctx, "k", time.Second, 2, swl.NowMs(T+2), swl.Penalize())
		expect(t, v, err, verdict(false, 2, 0, 999, 1_000, 1_000))
		expectEntries(t, client, "k", T+1, T+2)
		// Without PENALIZE a denial records nothing.
		v, err = client.Check(ctx, "k", time.Second, 2, swl.NowMs(T+3))
		expect(t, v, err, verdict(false, 2, 0, 998, 999, 1_000))
		expectEntries(t, client, "k", T+1, T+2)
	})
}

func TestResetAndEntries(t *testing.T) {
	each(t, func(t *testing.T, s *server, client *swl.Client) {
		expectEntries(t, client, "k")
		for range 3 {
			if _, err := client.Check(ctx, "k", time.Minute, 3, swl.NowMs(T)); err != nil {
				t.Fatal(err)
			}
		}
		v, err := client.Check(ctx, "k", time.Minute, 3, swl.NowMs(T))
		expect(t, v, err, verdict(false, 3, 0, 60_000, 60_000, 60_000))
		if err := client.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		expectEntries(t, client, "k")
		v, err = client.Check(ctx, "k", time.Minute, 3, swl.NowMs(T))
		expect(t, v, err, verdict(true, 3, 2, -1, 60_000, 60_000))
		// On the server's clock, which trims the entries at T.
		before := time.Now().UnixMilli()
		if _, err := client.Check(ctx, "k", time.Minute, 3); err != nil {
			t.Fatal(err)
		}
		times, err := client.Entries(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if len(times) != 1 || times[0] < before-1_000 || times[0] > time.Now().UnixMilli()+1_000 {
			t.Fatalf("entries %v", times)
		}
	})
}

func TestUsage(t *testing.T) {
	each(t, func(t *testing.T, s *server, client *swl.Client) {
		usage, err := client.Usage(ctx, "none", time.Minute)
		if err != nil || usage != (swl.Usage{}) {
			t.Fatalf("usage %+v, %v", usage, err)
		}
		if _, err := client.Check(ctx, "now", time.Minute, 5, swl.Cost(2)); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Check(ctx, "now", time.Second, 5); err != nil {
			t.Fatal(err)
		}
		usage, err = client.Usage(ctx, "now", time.Minute)
		if err != nil || usage.Units != 3 || usage.ResetAfter <= 50*time.Second || usage.ResetAfter > time.Minute {
			t.Fatalf("usage %+v, %v", usage, err)
		}
		if units, err := client.Units(ctx, "now", time.Minute); err != nil || units != 3 {
			t.Fatalf("units %d, %v", units, err)
		}
	})
}

func TestADenialCacheAnswersLikeDenialsUntilTheirWaitHasPassed(t *testing.T) {
	each(t, func(t *testing.T, s *server, _ *swl.Client) {
		cache := swl.NewDenialCache(100)
		client := s.swl(swl.WithDenialCache(cache))
		checks := func() int {
			swlCalls, _ := s.Calls("swl.check")
			fcalls, _ := s.Calls("fcall")
			return swlCalls + fcalls
		}
		if v, err := client.Check(ctx, "c", time.Minute, 1); err != nil || !v.Allowed {
			t.Fatalf("%+v %v", v, err)
		}
		denied, err := client.Check(ctx, "c", time.Minute, 1)
		if err != nil || denied.Allowed || denied.RetryAfter <= 0 {
			t.Fatalf("%+v %v", denied, err)
		}
		before := checks()
		for range 3 {
			v, err := client.Check(ctx, "c", time.Minute, 1)
			if err != nil || v.Allowed || v.RetryAfter > denied.RetryAfter {
				t.Fatalf("%+v %v", v, err)
			}
		}
		if after := checks(); after != before {
			t.Fatalf("%d checks reached Redis while the denial was cached", after-before)
		}
		// Other windows, and a time given, are Redis's to answer.
		if v, err := client.Check(ctx, "c", time.Minute, 2); err != nil || !v.Allowed {
			t.Fatalf("%+v %v", v, err)
		}
		if _, err := client.Check(ctx, "c", time.Minute, 1, swl.NowMs(T)); err != nil {
			t.Fatal(err)
		}
		if checks() != before+2 {
			t.Fatalf("%d checks, not 2", checks()-before)
		}
		// A reset drops the key's denials: the next check is admitted.
		if err := client.Reset(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if v, err := client.Check(ctx, "c", time.Minute, 1); err != nil || !v.Allowed {
			t.Fatalf("after a reset: %+v %v", v, err)
		}
	})
}

func TestErrors(t *testing.T) {
	each(t, func(t *testing.T, s *server, client *swl.Client) {
		// Refused by the server: an error reply, certain to change nothing.
		_, err := client.Check(ctx, "k", time.Second, 2, swl.NowMs(T), swl.Cost(0))
		if err == nil || err.Error() != "ERR cost must be an integer from 1 to 100000" || errors.Is(err, swl.ErrUncertainOutcome) {
			t.Fatalf("%v", err)
		}
		_, err = client.Peek(ctx, "k", time.Second, 2, swl.NowMs(T), swl.Penalize())
		if err == nil || err.Error() != "ERR syntax error" {
			t.Fatalf("%v", err)
		}
		s.Do("SET", "string", "x")
		_, err = client.Check(ctx, "string", time.Second, 2, swl.NowMs(T))
		if err == nil || err.Error() != "WRONGTYPE Operation against a key holding the wrong kind of value" {
			t.Fatalf("%v", err)
		}
		// Refused before it is sent.
		_, err = client.Check(ctx, "k", 1500*time.Microsecond, 2)
		if err == nil || errors.Is(err, swl.ErrUncertainOutcome) {
			t.Fatalf("%v", err)
		}
		_, err = client.Check(ctx, "k", time.Second, 2, swl.Window(0, 1))
		if err == nil {
			t.Fatal("a window of 0 sent")
		}
		expectEntries(t, client, "k")
	})
}

// 50 goroutines of 20 checks each on a new client, against a limit of 100:
// exactly 100 admitted, including where they race to probe and to load
// the library.
func TestConcurrentChecksAreExact(t *testing.T) {
	each(t, func(t *testing.T, s *server, client *swl.Client) {
		var admitted atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					v, err := client.Check(ctx, "shared", time.Minute, 100)
					if err != nil {
						errs <- err
						return
					}
					if v.Allowed {
						admitted.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n := admitted.Load(); n != 100 {
			t.Fatalf("%d admitted", n)
		}
		// Each check sent once.
		if n := s.Succeeded("swl.check") + s.Succeeded("fcall"); n != 1000 {
			t.Fatalf("%d checks ran", n)
		}
		if n := len(s.Entries("shared")); n != 100 {
			t.Fatalf("%d entries", n)
		}
		if loads := s.Succeeded("function|load"); !s.Module && loads != 1 {
			t.Fatalf("%d libraries loaded", loads)
		}
	})
}
