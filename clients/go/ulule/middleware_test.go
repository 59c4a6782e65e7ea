package ulule_test

// ulule's own middlewares, unchanged, over real HTTP on this store.

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/ulule/limiter/v3"
	mfasthttp "github.com/ulule/limiter/v3/drivers/middleware/fasthttp"
	mgin "github.com/ulule/limiter/v3/drivers/middleware/gin"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	"github.com/valyala/fasthttp"
)

func init() {
	gin.SetMode(gin.TestMode)
}

// response is what a test reads of an HTTP response.
type response struct {
	status                  int
	limit, remaining, reset string
	body                    string
}

// framework serves the app, "hello" at /, behind ulule's middleware with
// limiter, and returns how to GET /.
type framework struct {
	name  string
	serve func(t *testing.T, limiter *limiter.Limiter) (get func() response)
}

var frameworks = []framework{
	{"stdlib", serveStdlib},
	{"gin", serveGin},
	{"fasthttp", serveFasthttp},
}

// A client (the loopback address, the middlewares' default key) asking
// for / four times, the fourth a minute after the first.
func TestMiddlewares(t *testing.T) {
	rate := limiter.Rate{Period: time.Minute, Limit: 2}
	ok := func(remaining, reset int64) response {
		return response{http.StatusOK, "2", strconv.FormatInt(remaining, 10), strconv.FormatInt(reset, 10), "hello"}
	}
	refused := func(reset int64) response {
		return response{http.StatusTooManyRequests, "2", "0", strconv.FormatInt(reset, 10), "Limit exceeded"}
	}
	for _, framework := range frameworks {
		t.Run(framework.name, func(t *testing.T) {
			t.Parallel()
			each(t, func(t *testing.T, s *server) {
				store, clock := s.storeAt(t)
				get := framework.serve(t, limiter.New(store, rate))
				for _, step := range []struct {
					at   int64
					want response
				}{
					{T, ok(1, S+60)},
					{T + 500, ok(0, S+60)},
					{T + 1_000, refused(S + 60)},
					// The request at T has left the window.
					{T + 60_000, ok(0, S+120)},
				} {
					clock.Set(step.at)
					if got := get(); got != step.want {
						t.Fatalf("at T+%d: got %+v, want %+v", step.at-T, got, step.want)
					}
				}
				expectEntries(t, s, logKey("127.0.0.1"), T+500, T+60_000)
			})
		})
	}
}

func serveStdlib(t *testing.T, limiter *limiter.Limiter) func() response {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello")
	})
	server := httptest.NewServer(stdlib.NewMiddleware(limiter).Handler(hello))
	t.Cleanup(server.Close)
	return get(t, server)
}

func serveGin(t *testing.T, limiter *limiter.Limiter) func() response {
	engine := gin.New()
	engine.Use(mgin.NewMiddleware(limiter))
	engine.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "hello") })
	server := httptest.NewServer(engine)
	t.Cleanup(server.Close)
	return get(t, server)
}

// get is a GET of server's root, as a response.
func get(t *testing.T, server *httptest.Server) func() response {
	return func() response {
		t.Helper()
		reply, err := server.Client().Get(server.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer reply.Body.Close()
		return httpResponse(t, reply)
	}
}

// httpResponse reads reply, stripping the newline http.Error ends with.
func httpResponse(t *testing.T, reply *http.Response) response {
	t.Helper()
	body, err := io.ReadAll(reply.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 0 && body[len(body)-1] == '\n' {
		body = body[:len(body)-1]
	}
	return response{
		status:    reply.StatusCode,
		limit:     reply.Header.Get("X-RateLimit-Limit"),
		remaining: reply.Header.Get("X-RateLimit-Remaining"),
		reset:     reply.Header.Get("X-RateLimit-Reset"),
		body:      string(body),
	}
}

func serveFasthttp(t *testing.T, limiter *limiter.Limiter) func() response {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hello := func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("hello") }
	server := &fasthttp.Server{Handler: mfasthttp.NewMiddleware(limiter).Handle(hello)}
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	client := &fasthttp.Client{}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		_ = server.Shutdown()
		<-served
	})
	url := "http://" + listener.Addr().String() + "/"
	return func() response {
		t.Helper()
		request, reply := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(request)
		defer fasthttp.ReleaseResponse(reply)
		request.SetRequestURI(url)
		if err := client.Do(request, reply); err != nil {
			t.Fatal(err)
		}
		return response{
			status:    reply.StatusCode(),
			limit:     string(reply.Header.Peek("X-RateLimit-Limit")),
			remaining: string(reply.Header.Peek("X-RateLimit-Remaining")),
			reset:     string(reply.Header.Peek("X-RateLimit-Reset")),
			body:      string(reply.Body()),
		}
	}
}
