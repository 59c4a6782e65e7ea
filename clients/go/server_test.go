package swl_test

// Real redis-server processes for the tests, from internal/redistest.

import (
	"testing"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
)

// T is the tests' time: 2023-11-14, Unix milliseconds.
const T int64 = 1_700_000_000_000

// encodings are the encodings where behaviour is checked: the module's
// swl.encoding, or the library's WithEncoding.
var encodings = []swl.Encoding{swl.Zset, swl.Compact}

// server is a real redis-server (see redistest) and the client the tests
// make of it.
type server struct{ *redistest.Server }

func startServer(t testing.TB, module bool, encoding swl.Encoding, extra ...string) *server {
	t.Helper()
	return &server{redistest.Start(t, module, encoding.String(), extra...)}
}

// swl is a redis-swl client over a go-redis client with default settings.
func (s *server) swl(options ...swl.Option) *swl.Client {
	return swl.New(swl.GoRedis(s.Client(nil)), options...)
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
