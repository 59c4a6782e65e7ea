package swlhttp

// The denial cache: after Redis denies a check, the key's next checks are
// denied in the process until the reply's retry-after has passed, without
// asking Redis again. A denial records nothing, so until then the log can
// only admit such a call if entries leave it some other way (a refund, a
// reset, a check with narrower windows, a failover to a lagging replica, a
// step of the server's clock); a refund or reset through the limiter drops
// the key's denial, the others keep the cache stricter than Redis for at
// most the cached wait. The cache never admits.
//
// It is the Rust crate's DenialCache (and the Python and Node packages'),
// with one denial per key rather than one per set of windows: a cache
// belongs to one Limiter, whose windows and cost never change.

import (
	"container/list"
	"sync"
	"time"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// defaultDenialCacheKeys is the number of keys the cache remembers by
// default, as in the other languages.
const defaultDenialCacheKeys = 10_000

type denial struct {
	verdict swl.Verdict
	// When the denied call could first be admitted.
	until time.Time
}

// at is the denial as it stands at now (before until): the waits less the
// time since, the rest as Redis gave it.
func (d *denial) at(now time.Time) swl.Verdict {
	leftMs := ceilMs(d.until.Sub(now))
	elapsed := max(0, d.verdict.RetryAfter.Milliseconds()-leftMs)
	v := d.verdict
	v.RetryAfter = milliseconds(leftMs)
	v.ResetAfter = milliseconds(max(0, v.ResetAfter.Milliseconds()-elapsed))
	return v
}

type cached struct {
	key string
	// The forget count when the key was last forgotten (0: never).
	forgotten uint64
	denial    *denial
}

// denialCache holds recent denials by key, for at most maxKeys keys, the
// least recently used forgotten first. It is safe for concurrent use; a
// nil *denialCache caches nothing.
type denialCache struct {
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

func newDenialCache(maxKeys int) *denialCache {
	if maxKeys <= 0 {
		return nil
	}
	return &denialCache{maxKeys: maxKeys, keys: map[string]*list.Element{}, order: list.New()}
}

// answer is the cached denial of key, if its wait has not passed at now.
func (c *denialCache) answer(key string, now time.Time) (swl.Verdict, bool) {
	if c == nil {
		return swl.Verdict{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	element, ok := c.keys[key]
	if !ok {
		return swl.Verdict{}, false
	}
	entry := element.Value.(*cached)
	if entry.denial != nil && !now.Before(entry.denial.until) {
		entry.denial = nil
	}
	if entry.denial == nil {
		if entry.forgotten == 0 {
			c.remove(element)
		}
		return swl.Verdict{}, false
	}
	c.order.MoveToBack(element)
	return entry.denial.at(now), true
}

// ticket is taken before a check is sent, and given back with its verdict
// to keep: a forget in between wins.
func (c *denialCache) ticket() uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forgets
}

// keep keeps verdict, of a check sent at sent, if it is a denial that
// waiting ends; its wait counts from sent (Redis decided after it, so the
// cached denial never outlasts Redis's own). An admission drops the key's
// denial: entries were added, so it still denies, but its remaining and
// reset are of the log before.
func (c *denialCache) keep(key string, verdict swl.Verdict, ticket uint64, sent time.Time) {
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
	fresh := &denial{verdict: verdict, until: sent.Add(verdict.RetryAfter)}
	if known {
		element.Value.(*cached).denial = fresh
		c.order.MoveToBack(element)
		return
	}
	c.insert(&cached{key: key, denial: fresh})
}

// forget drops key's denial: its log lost entries another way than the
// cache can see. A check sent before and answered after does not put its
// denial back.
func (c *denialCache) forget(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(key)
}

func (c *denialCache) forgetLocked(key string) {
	c.forgets++
	element, ok := c.keys[key]
	if !ok {
		// Kept, empty, so that checks already sent keep nothing.
		c.insert(&cached{key: key, forgotten: c.forgets})
		return
	}
	entry := element.Value.(*cached)
	entry.denial = nil
	entry.forgotten = c.forgets
	c.order.MoveToBack(element)
}

func (c *denialCache) insert(entry *cached) {
	c.keys[entry.key] = c.order.PushBack(entry)
	for len(c.keys) > c.maxKeys {
		oldest := c.order.Front()
		c.forgottenBefore = max(c.forgottenBefore, oldest.Value.(*cached).forgotten)
		c.remove(oldest)
	}
}

func (c *denialCache) remove(element *list.Element) {
	delete(c.keys, c.order.Remove(element).(*cached).key)
}

// len is the number of keys remembered (with a denial, or forgotten
// lately).
func (c *denialCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}
