package golimiter_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/httplimit"

	"github.com/redis-swl/redis-swl/clients/go/golimiter"
	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
)

// response is what the tests read of a reply: its status, body and
// rate-limit headers.
type response struct {
	status                  int
	body                    string
	limit, remaining, reset string
	retryAfter              string
}

func get(t *testing.T, client *http.Client, url string) response {
	t.Helper()
	reply, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer reply.Body.Close()
	body, err := io.ReadAll(reply.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{
		status:     reply.StatusCode,
		body:       string(body),
		limit:      reply.Header.Get(httplimit.HeaderRateLimitLimit),
		remaining:  reply.Header.Get(httplimit.HeaderRateLimitRemaining),
		reset:      reply.Header.Get(httplimit.HeaderRateLimitReset),
		retryAfter: reply.Header.Get(httplimit.HeaderRetryAfter),
	}
}

// go-limiter's own middleware, over real HTTP, on the store: Tokens
// requests a minute from one address pass with the headers counting down,
// the next is refused with 429 and a Retry-After of when it would pass,
// and a minute later the address may come again. A store that fails
// answers 500.
func TestHTTPLimitMiddleware(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		c := newClock(T)
		store := newStore(t, server, c, golimiter.Config{Tokens: 3, Interval: time.Minute})
		middleware, err := httplimit.NewMiddleware(store, httplimit.IPKeyFunc())
		if err != nil {
			t.Fatal(err)
		}
		hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "hello")
		})
		web := httptest.NewServer(middleware.Handle(hello))
		t.Cleanup(web.Close)
		client := web.Client()

		// T is 2023-11-14 22:13:20 UTC.
		const inAMinute = "Tue, 14 Nov 2023 22:14:20 UTC"
		for _, remaining := range []string{"2", "1", "0"} {
			want := response{http.StatusOK, "hello", "3", remaining, inAMinute, ""}
			if got := get(t, client, web.URL); got != want {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
		}
		refused := response{http.StatusTooManyRequests, "Too Many Requests\n", "3", "0", inAMinute, inAMinute}
		if got := get(t, client, web.URL); got != refused {
			t.Fatalf("got  %+v\nwant %+v", got, refused)
		}
		expectEntries(t, server, "127.0.0.1", T, T, T)

		c.Set(T + 60_000)
		again := response{http.StatusOK, "hello", "3", "2", "Tue, 14 Nov 2023 22:15:20 UTC", ""}
		if got := get(t, client, web.URL); got != again {
			t.Fatalf("got  %+v\nwant %+v", got, again)
		}
		expectEntries(t, server, "127.0.0.1", T+60_000)

		if err := store.Close(ctx); err != nil {
			t.Fatal(err)
		}
		failed := response{http.StatusInternalServerError, "Internal Server Error\n", "", "", "", ""}
		if got := get(t, client, web.URL); got != failed {
			t.Fatalf("got  %+v\nwant %+v", got, failed)
		}
	})
}
