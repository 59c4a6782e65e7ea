package ulule

import (
	"time"

	"github.com/ulule/limiter/v3"
)

// SetClock makes s, a store of this package, send every call at clock's
// time (the server's clock decides otherwise), so that the tests can
// expect exact Reset seconds.
func SetClock(s limiter.Store, clock func() time.Time) {
	s.(*store).now = clock
}
