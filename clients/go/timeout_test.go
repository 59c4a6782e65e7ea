package swl_test

// A check or refund is never sent twice, and never taken for certain when
// no reply came. Each test stalls a real server (DEBUG SLEEP 0.8) while a
// go-redis client with a short read timeout (or a context deadline) and
// go-redis's default retries (MaxRetries 3) sends: a call that completed is
// recorded once, one that timed out at most once, and failed with an
// *UncertainOutcomeError.

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/swlvalkey"
)

// The stall is four times the calls' timeouts (200 ms): a call sent late
// on a busy machine still times out within it, and one that waited for the
// server to wake (a retry) takes longer than tookAtMost.
const (
	stallSeconds = 0.8
	tookAtMost   = 600 * time.Millisecond
)

func debugServer(t *testing.T, module bool) *server {
	return startServer(t, module, swl.Zset, "--enable-debug-command", "yes")
}

func uncertain(t *testing.T, err error, command, key string) {
	t.Helper()
	if !errors.Is(err, swl.ErrUncertainOutcome) {
		t.Fatalf("not an uncertain outcome: %v", err)
	}
	var uncertain *swl.UncertainOutcomeError
	if !errors.As(err, &uncertain) || uncertain.Command != command || uncertain.Key != key {
		t.Fatalf("%#v", err)
	}
	// What the Doer gave: a timeout.
	var timeout interface{ Timeout() bool }
	if !errors.As(err, &timeout) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("not a timeout: %v", err)
	}
}

func oneOf(t *testing.T, got []int64, options ...[]int64) {
	t.Helper()
	for _, option := range options {
		if slices.Equal(got, option) {
			return
		}
	}
	t.Fatalf("%v is none of %v", got, options)
}

// session checks and refunds on one key, a check and a refund of them
// while the server is stalled, with timeout (a context's) on each call.
func session(t *testing.T, s *server, client *swl.Client, timeout time.Duration) {
	key := "session"
	call := func(f func(ctx context.Context) (swl.Verdict, error)) (swl.Verdict, error, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		v, err := f(ctx)
		return v, err, time.Since(start)
	}
	checkAt := func(at int64) func(ctx context.Context) (swl.Verdict, error) {
		return func(ctx context.Context) (swl.Verdict, error) {
			return client.Check(ctx, key, time.Minute, 10, swl.NowMs(at))
		}
	}
	command, function := "SWL.CHECK", "swl_check"
	if !s.Module {
		command = function
	}
	// A completed check, recorded once (it also loads the library where the
	// server has no module).
	v, err, _ := call(func(ctx context.Context) (swl.Verdict, error) {
		return client.Check(ctx, key, time.Minute, 10, swl.NowMs(T), swl.Cost(3))
	})
	expect(t, v, err, verdict(true, 10, 7, -1, 60_000, 60_000))
	oneOf(t, s.Entries(key), []int64{T, T, T})
	ran := s.Succeeded("swl.check") + s.Succeeded("fcall")

	stall := s.Stall(stallSeconds)
	_, err, took := call(checkAt(T + 1))
	stall.Wait()
	// Sent once: run once at most, when the server woke.
	if n := s.Succeeded("swl.check") + s.Succeeded("fcall") - ran; n > 1 {
		t.Fatalf("the check ran %d times", n)
	}
	uncertain(t, err, command, key)
	afterCheck := s.Entries(key)
	oneOf(t, afterCheck, []int64{T, T, T}, []int64{T, T, T, T + 1})
	// Given up at the first timeout: no retry waited for the server.
	// (go-redis's retries would send it again on a new connection, which
	// the server answers when it wakes: recorded twice, and no error.)
	if took > tookAtMost {
		t.Fatalf("the check took %v", took)
	}

	// The client goes on.
	v, err, _ = call(checkAt(T + 2))
	expect(t, v, err, verdict(true, 10, 10-int64(len(afterCheck))-1, -1, 60_000, 60_000))
	beforeRefund := append(afterCheck, T+2)
	oneOf(t, s.Entries(key), beforeRefund)

	stall = s.Stall(stallSeconds)
	_, err, _ = call(func(ctx context.Context) (swl.Verdict, error) {
		return client.Refund(ctx, key, time.Minute, 10, swl.NowMs(T+3))
	})
	refund := "SWL.REFUND"
	if !s.Module {
		refund = "swl_refund"
	}
	uncertain(t, err, refund, key)
	stall.Wait()
	oneOf(t, s.Entries(key), beforeRefund, beforeRefund[:len(beforeRefund)-1])

	// A reset that gets no reply is uncertain too.
	beforeReset := s.Entries(key)
	stall = s.Stall(stallSeconds)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err = client.Reset(ctx, key)
	cancel()
	uncertain(t, err, "DEL", key)
	stall.Wait()
	// Deleted, or not: it may not have gone out (a new connection's
	// handshake timed out first), which the client cannot tell.
	oneOf(t, s.Entries(key), nil, beforeReset)
}

func modes() []bool { return []bool{true, false} }

// A read timeout of the go-redis client's, with its default retries.
func TestReadTimeoutSendsCheckAndRefundOnce(t *testing.T) {
	for _, module := range modes() {
		s := debugServer(t, module)
		rdb := s.Client(&redis.Options{ReadTimeout: 200 * time.Millisecond})
		session(t, s, swl.New(swl.GoRedis(rdb)), time.Minute)
	}
}

// A context's deadline, which go-redis follows with ContextTimeoutEnabled.
func TestContextDeadlineSendsCheckAndRefundOnce(t *testing.T) {
	for _, module := range modes() {
		s := debugServer(t, module)
		rdb := s.Client(&redis.Options{ContextTimeoutEnabled: true})
		session(t, s, swl.New(swl.GoRedis(rdb)), 200*time.Millisecond)
	}
}

// valkey-go, which follows a context's deadline and sends again only what
// is marked read-only.
func TestValkeyContextDeadlineSendsCheckAndRefundOnce(t *testing.T) {
	for _, module := range modes() {
		s := debugServer(t, module)
		session(t, s, swl.New(swlvalkey.Adapt(s.valkey())), 200*time.Millisecond)
	}
}

// A peek changes nothing: one that times out is a plain error.
func TestPeekThatTimesOutIsNoUncertainOutcome(t *testing.T) {
	for _, module := range modes() {
		s := debugServer(t, module)
		rdb := s.Client(&redis.Options{ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
		client := swl.New(swl.GoRedis(rdb))
		if _, err := client.Peek(ctx, "k", time.Second, 3); err != nil {
			t.Fatal(err)
		}
		stall := s.Stall(stallSeconds)
		_, err := client.Peek(ctx, "k", time.Second, 3)
		stall.Wait()
		var timeout interface{ Timeout() bool }
		if err == nil || errors.Is(err, swl.ErrUncertainOutcome) || !errors.As(err, &timeout) || !timeout.Timeout() {
			t.Fatalf("%v", err)
		}
	}
}

// A probe that times out fails the call with its error, sending nothing
// else; the next call probes again.
func TestProbeThatTimesOut(t *testing.T) {
	for _, module := range modes() {
		s := debugServer(t, module)
		rdb := s.Client(&redis.Options{ReadTimeout: 200 * time.Millisecond})
		client := swl.New(swl.GoRedis(rdb))
		stall := s.Stall(stallSeconds)
		_, err := client.Check(ctx, "k", time.Second, 3)
		stall.Wait()
		var timeout interface{ Timeout() bool }
		if err == nil || errors.Is(err, swl.ErrUncertainOutcome) || !errors.As(err, &timeout) {
			t.Fatalf("%v", err)
		}
		if s.Do("EXISTS", "k").(int64) != 0 {
			t.Fatal("a check was sent")
		}
		v, err := client.Check(ctx, "k", time.Second, 3)
		if err != nil || !v.Allowed || client.UsesLibrary() == module {
			t.Fatalf("%+v %v", v, err)
		}
	}
}
