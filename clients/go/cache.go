package swl

// The denial cache: after Redis denies a check, the same key, windows and
// a cost at least as large are denied in the process until the reply's
// retry-after has passed, without asking Redis again. A denial records
// nothing, so until then the log can only admit such a call if entries
// leave it some other way (a refund, a reset, a check with narrower
// windows, a failover to a lagging replica, a step of the server's clock);
// a refund or reset through the same client drops the key's denials, the
// others keep the cache stricter than Redis for at most the cached wait.
// The cache never admits. It is the Rust crate's DenialCache (and the
// Python and Node packages').

import (
	"container/list"
	"slices"
	"sync"
	"time"
)

// DefaultDenialCacheKeys is the number of keys a cache remembers by
// default, as in the other languages.
const DefaultDenialCacheKeys = 10_000

// deniedPerKey is how many denials of different windows one key keeps at
// most: a limiter uses one set of windows per key, so more is a sign of
// several.
const deniedPerKey = 4

// WindowLimit is one window of a check: at most Limit units in any window
// of length Window (a whole number of milliseconds).
type WindowLimit struct {
	Window time.Duration
	Limit  int64
}

type denial struct {
	windows []WindowLimit
	cost    int64
	verdict Verdict
	// When the denied call could first be admitted.
	until time.Time
}

// at is the denial as it stands at now (before until): the waits less the
// time since, the rest as Redis gave it.
func (d *denial) at(now time.Time) Verdict {
	leftMs := ceilMs(d.until.Sub(now))
	elapsed := max(0, d.verdict.RetryAfter.Milliseconds()-leftMs)
	v := d.verdict
	v.RetryAfter = time.Duration(leftMs) * time.Millisecond
	v.ResetAfter = time.Duration(max(0, v.ResetAfter.Milliseconds()-elapsed)) * time.Millisecond
	return v
}

// ceilMs is d in whole milliseconds, rounded up: a wait in part of a
// millisecond is a whole one.
func ceilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

type cached struct {
	key string
	// The forget count when the key was last forgotten (0: never).
	forgotten uint64
	denials   []*denial
}

// DenialCache holds recent denials by key, for at most maxKeys keys, the
// least recently used forgotten first. It is safe for concurrent use; a nil
// *DenialCache caches nothing. Give one to a [Client] with
// [WithDenialCache]; swlhttp's middleware keeps one of its own.
type DenialCache struct {
	mu      sync.Mutex
	maxKeys int
	keys    map[string]*list.Element
	// Least recently used first; each element a *cached.
	order *list.List
	// Forgets so far: tickets are taken from it.
	forgets uint64
	// The latest forget of a key no longer remembered: a ticket older than
	// that may be from before its forget, so it keeps nothing.
	forgottenBefore uint64
}

// NewDenialCache is a cache of at most maxKeys keys
// ([DefaultDenialCacheKeys] is the other languages' default); nil, which
// caches nothing, for 0 or fewer.
func NewDenialCache(maxKeys int) *DenialCache {
	if maxKeys <= 0 {
		return nil
	}
	return &DenialCache{maxKeys: maxKeys, keys: map[string]*list.Element{}, order: list.New()}
}

// Answer is the cached answer to a check of cost against windows (the
// first, then the others) on key, if a denial of the same windows and at
// most that cost is still waiting at now.
func (c *DenialCache) Answer(key string, windows []WindowLimit, cost int64, now time.Time) (Verdict, bool) {
	if c == nil {
		return Verdict{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	element, ok := c.keys[key]
	if !ok {
		return Verdict{}, false
	}
	entry := element.Value.(*cached)
	entry.denials = slices.DeleteFunc(entry.denials, func(d *denial) bool { return !now.Before(d.until) })
	var found *denial
	for _, d := range entry.denials {
		if cost >= d.cost && slices.Equal(d.windows, windows) {
			found = d
			break
		}
	}
	if len(entry.denials) == 0 && entry.forgotten == 0 {
		c.remove(element)
	}
	if found == nil {
		return Verdict{}, false
	}
	c.order.MoveToBack(element)
	return found.at(now), true
}

// Ticket is taken before a check is sent, and given back with its verdict
// to [DenialCache.Keep]: a forget in between wins.
func (c *DenialCache) Ticket() uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forgets
}

// Keep keeps verdict, of a check of cost against windows on key sent at
// sent, if it is a denial that waiting ends; its wait counts from sent
// (Redis decided after it, so the cached denial never outlasts Redis's
// own). An admission drops the key's denials: entries were added, so they
// still deny, but their remaining and reset are of the log before.
func (c *DenialCache) Keep(key string, windows []WindowLimit, cost int64, verdict Verdict, ticket uint64, sent time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	element, known := c.keys[key]
	if verdict.Allowed {
		if known {
			c.forgetLocked(key)
		}
		return
	}
	if verdict.RetryAfter < time.Millisecond {
		// Waiting cannot help (-1): nothing to wait for.
		return
	}
	forgotten := c.forgottenBefore
	if known {
		forgotten = element.Value.(*cached).forgotten
	}
	if forgotten > ticket {
		return
	}
	fresh := &denial{windows: slices.Clone(windows), cost: cost, verdict: verdict, until: sent.Add(verdict.RetryAfter)}
	if !known {
		c.insert(&cached{key: key, denials: []*denial{fresh}})
		return
	}
	entry := element.Value.(*cached)
	entry.denials = slices.DeleteFunc(entry.denials, func(d *denial) bool {
		return d.cost == cost && slices.Equal(d.windows, windows)
	})
	entry.denials = append(entry.denials, fresh)
	if len(entry.denials) > deniedPerKey {
		entry.denials = entry.denials[len(entry.denials)-deniedPerKey:]
	}
	c.order.MoveToBack(element)
}

// Forget drops key's denials: its log lost entries another way than the
// cache can see. A check sent before and answered after does not put its
// denial back.
func (c *DenialCache) Forget(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(key)
}

func (c *DenialCache) forgetLocked(key string) {
	c.forgets++
	element, ok := c.keys[key]
	if !ok {
		// Kept, empty, so that checks already sent keep nothing.
		c.insert(&cached{key: key, forgotten: c.forgets})
		return
	}
	entry := element.Value.(*cached)
	entry.denials = nil
	entry.forgotten = c.forgets
	c.order.MoveToBack(element)
}

func (c *DenialCache) insert(entry *cached) {
	c.keys[entry.key] = c.order.PushBack(entry)
	for len(c.keys) > c.maxKeys {
		oldest := c.order.Front()
		c.forgottenBefore = max(c.forgottenBefore, oldest.Value.(*cached).forgotten)
		c.remove(oldest)
	}
}

func (c *DenialCache) remove(element *list.Element) {
	delete(c.keys, c.order.Remove(element).(*cached).key)
}

// Len is the number of keys remembered (with a denial, or forgotten
// lately).
func (c *DenialCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}
