package ulule

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// keySuffix follows ulule's own key (prefix:key): ulule's redis store keeps
// a string counter there, which SWL.CHECK refuses with WRONGTYPE, so that
// while old counters live (up to a Period after the switch) every call on
// them would fail. The rate's period in milliseconds follows it: a check
// trims what is older than its own window, so two rates on one key (ten a
// second and a hundred an hour) need a log each, or the shorter would trim
// away what the longer counts.
const keySuffix = ":swl:"

// store is a limiter.Store over a redis-swl client.
type store struct {
	client *swl.Client
	prefix string
	// now, where set (by the tests), is the time every call is made at, sent
	// with it. Unset, the server's clock decides.
	now func() time.Time
}

// NewStore is [NewStoreWithOptions] with ulule's default prefix, "limiter",
// as ulule's redis.NewStore.
func NewStore(client redis.UniversalClient) (limiter.Store, error) {
	return NewStoreWithOptions(client, limiter.StoreOptions{Prefix: limiter.DefaultPrefix})
}

// NewStoreWithOptions is a store over a go-redis client (single, cluster,
// ring or failover), in place of ulule's redis.NewStoreWithOptions. It
// sends nothing yet: the client asks the server whether it has the module
// on the first call. Its only error is a nil client.
func NewStoreWithOptions(client redis.UniversalClient, options limiter.StoreOptions) (limiter.Store, error) {
	if client == nil {
		return nil, errors.New("ulule: NewStoreWithOptions needs a go-redis client, not nil")
	}
	return NewStoreFromClient(swl.New(swl.GoRedis(client)), options), nil
}

// NewStoreFromClient is a store over a redis-swl client built by its user
// (over any swl.Doer, with its own options). It panics for a nil client.
func NewStoreFromClient(c *swl.Client, options limiter.StoreOptions) limiter.Store {
	if c == nil {
		panic("ulule: NewStoreFromClient needs a *swl.Client, not nil")
	}
	return &store{client: c, prefix: options.Prefix}
}

// key is ulule's key for key (prefix:key), followed by keySuffix and the
// rate's period in milliseconds.
func (s *store) key(key string, rate limiter.Rate) string {
	return s.prefix + ":" + key + keySuffix + strconv.FormatInt(rate.Period.Milliseconds(), 10)
}

// clock is when a call is made: with s.now set, its time, sent with the
// call (the options); otherwise the server's clock decides, and the local
// time once the reply has come stands for it.
func (s *store) clock() (func() time.Time, []swl.RequestOption) {
	if s.now == nil {
		return time.Now, nil
	}
	at := s.now()
	return func() time.Time { return at }, []swl.RequestOption{swl.At(at)}
}

// Get records one request, if it fits.
func (s *store) Get(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	return s.Increment(ctx, key, 1, rate)
}

// Increment records a request of count units (at most 100,000), if it
// fits. A count of 0 records nothing (Peek); a negative count gives back
// that many of the newest units (SWL.REFUND), as ulule's INCRBY of a
// negative count takes them off.
func (s *store) Increment(ctx context.Context, key string, count int64, rate limiter.Rate) (limiter.Context, error) {
	switch {
	case count == 0:
		return s.Peek(ctx, key, rate)
	case count < 0:
		now, options := s.clock()
		v, err := s.client.Refund(ctx, s.key(key, rate), rate.Period, rate.Limit, append(options, swl.Cost(-count))...)
		if err != nil {
			return limiter.Context{}, err
		}
		return s.current(ctx, key, rate, v, -count, now, options)
	}
	now, options := s.clock()
	v, err := s.client.Check(ctx, s.key(key, rate), rate.Period, rate.Limit, append(options, swl.Cost(count))...)
	if err != nil {
		return limiter.Context{}, err
	}
	return limiter.Context{
		Limit:     rate.Limit,
		Remaining: v.Remaining,
		Reset:     resetAt(now(), v.ResetAfter),
		Reached:   !v.Allowed,
	}, nil
}

// Peek is the log as it stands, recording nothing: Reached when a Get now
// would be refused.
func (s *store) Peek(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	now, options := s.clock()
	v, err := s.client.Peek(ctx, s.key(key, rate), rate.Period, rate.Limit, options...)
	if err != nil {
		return limiter.Context{}, err
	}
	return s.current(ctx, key, rate, v, 1, now, options)
}

// current is the log as it stands from v, the reply of a peek (or a
// refund, which replies as one) of a request of cost units: SWL.PEEK
// replies what that request would leave, as if recorded where it fits.
func (s *store) current(ctx context.Context, key string, rate limiter.Rate, v swl.Verdict, cost int64,
	now func() time.Time, options []swl.RequestOption) (limiter.Context, error) {
	remaining, resetAfter := v.Remaining, v.ResetAfter
	if v.Allowed {
		remaining += cost
		// The reply's ResetAfter counts the request it would record: a
		// peek with limit 0, which admits nothing, reads the log's own.
		// An empty window needs none: its quota is back now.
		resetAfter = 0
		if remaining < rate.Limit {
			own, err := s.client.Peek(ctx, s.key(key, rate), rate.Period, 0, options...)
			if err != nil {
				return limiter.Context{}, err
			}
			resetAfter = own.ResetAfter
		}
	}
	return limiter.Context{
		Limit:     rate.Limit,
		Remaining: remaining,
		Reset:     resetAt(now(), resetAfter),
		Reached:   remaining == 0,
	}, nil
}

// Reset deletes the log: the whole quota is back now.
func (s *store) Reset(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	now, _ := s.clock()
	if err := s.client.Reset(ctx, s.key(key, rate)); err != nil {
		return limiter.Context{}, err
	}
	remaining := max(rate.Limit, 0)
	return limiter.Context{
		Limit:     rate.Limit,
		Remaining: remaining,
		Reset:     resetAt(now(), 0),
		Reached:   remaining == 0,
	}, nil
}

// resetAt is after from now in Unix seconds, rounded down as ulule's own
// stores give their window's end (and as time.Time's Unix does).
func resetAt(now time.Time, after time.Duration) int64 {
	return now.Add(after).Unix()
}
