package redis_rate

import "time"

// SetClock makes l send its calls at now's time rather than the server's,
// so that the tests' waits are exact.
func SetClock(l *Limiter, now func() time.Time) { l.now = now }
