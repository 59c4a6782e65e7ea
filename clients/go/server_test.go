package swl_test

// Real redis-server processes for the tests, from internal/redistest.

import (
	"testing"

	"github.com/valkey-io/valkey-go"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
	"github.com/redis-swl/redis-swl/clients/go/swlvalkey"
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

// valkey is a valkey-go client of the server, closed when the test ends.
func (s *server) valkey() valkey.Client {
	s.TB().Helper()
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true})
	if err != nil {
		s.TB().Fatal(err)
	}
	s.TB().Cleanup(client.Close)
	return client
}

// adapters are the Redis clients behaviour is checked through, each as a
// redis-swl client of a server.
var adapters = []struct {
	name string
	of   func(s *server, options ...swl.Option) *swl.Client
}{
	{"go-redis", func(s *server, options ...swl.Option) *swl.Client { return s.swl(options...) }},
	{"valkey-go", func(s *server, options ...swl.Option) *swl.Client {
		return swl.New(swlvalkey.Adapt(s.valkey()), options...)
	}},
}

// each runs test on a server with the module and on one without, in each
// of the encodings, through each adapter.
func each(t *testing.T, test func(t *testing.T, s *server, client *swl.Client)) {
	for _, adapter := range adapters {
		for _, module := range []bool{true, false} {
			for _, encoding := range encodings {
				name := "library"
				if module {
					name = "module"
				}
				t.Run(adapter.name+"/"+name+"/"+encoding.String(), func(t *testing.T) {
					t.Parallel()
					s := startServer(t, module, encoding)
					test(t, s, adapter.of(s, swl.WithEncoding(encoding)))
				})
			}
		}
	}
}
