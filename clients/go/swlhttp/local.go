package swlhttp

// A sliding-window log in process memory, for deciding while Redis cannot
// answer (the local policy). It gives SWL.CHECK's and SWL.REFUND's replies
// for the same calls: the clients' shared test vectors
// (clients/vectors/local-limiter.json, the module's own replies) hold it
// to that. It is the Python and Node packages' LocalLimiter, function for
// function. Calls are expected in time order, as a clock gives them.

import (
	"container/list"
	"fmt"
	"slices"
	"sort"
	"sync"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// maxWindows is the most windows one call takes (the first and its WINDOW
// clauses), as the module and the library take them.
const maxWindows = 100

// window is one limit, in the module's units.
type window struct {
	ms    int64
	limit int64
}

// entries is one client's log, ascending. The head is dropped by moving
// start, and the slice is compacted only when half of it is dropped, so
// trimming costs O(1) amortised rather than a copy of the log.
type entries struct {
	times []int64
	start int
}

func (e *entries) len() int { return len(e.times) - e.start }

func (e *entries) at(index int) int64 { return e.times[e.start+index] }

// firstAfter is the index in times of the first entry after t.
func (e *entries) firstAfter(t int64) int {
	live := e.times[e.start:]
	return e.start + sort.Search(len(live), func(i int) bool { return live[i] > t })
}

// countThrough is how many entries are at or before t.
func (e *entries) countThrough(t int64) int { return e.firstAfter(t) - e.start }

func (e *entries) dropThrough(t int64) {
	e.start = e.firstAfter(t)
	if e.start > 1024 && e.start*2 > len(e.times) {
		e.times = slices.Clone(e.times[e.start:])
		e.start = 0
	}
}

func (e *entries) dropNewest(n int64) {
	keep := int64(len(e.times)) - n
	e.times = e.times[:max(int64(e.start), keep)]
}

// add records cost entries at t, in time order.
func (e *entries) add(t, cost int64) {
	e.times = slices.Insert(e.times, e.firstAfter(t), slices.Repeat([]int64{t}, int(cost))...)
}

// untilLeft is the milliseconds until an entry at t leaves a window: 0 if
// out.
func untilLeft(t, windowMs, nowMs int64) int64 {
	return max(0, t+windowMs-nowMs)
}

// waitsLonger: -1 (waiting cannot help) outranks any wait; otherwise the
// longer wins.
func waitsLonger(retry, than int64) bool {
	if than == -1 {
		return false
	}
	return retry == -1 || retry > than
}

// localLimiter keeps logs for at most maxClients keys; the least recently
// used key is forgotten first (a forgotten client starts afresh). Each
// call costs O(log n) plus the entries it trims or records, so a client at
// a large limit cannot slow the process while Redis is down. It is safe
// for concurrent use.
type localLimiter struct {
	mu         sync.Mutex
	maxClients int
	logs       map[string]*list.Element
	// Least recently used first; each element a *keyed.
	order *list.List
}

type keyed struct {
	key string
	log *entries
}

func newLocalLimiter(maxClients int) *localLimiter {
	return &localLimiter{maxClients: maxClients, logs: map[string]*list.Element{}, order: list.New()}
}

// check is SWL.CHECK: trim, count, record if every window has room.
func (l *localLimiter) check(key string, windows []window, nowMs, cost int64) (swl.Verdict, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	log, err := l.trimmed(key, windows, nowMs)
	if err != nil {
		return swl.Verdict{}, err
	}
	counts := countsOf(log, windows, nowMs)
	allowed := fits(counts, windows, cost)
	if allowed {
		log.add(nowMs, cost)
		for i := range counts {
			counts[i] += cost
		}
	}
	verdict := localVerdict(log, windows, counts, nowMs, cost, allowed, false)
	l.keep(key, log)
	return verdict, nil
}

// refund is SWL.REFUND: trim, give back up to cost newest entries, and
// reply what a peek replies then.
func (l *localLimiter) refund(key string, windows []window, nowMs, cost int64) (swl.Verdict, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	log, err := l.trimmed(key, windows, nowMs)
	if err != nil {
		return swl.Verdict{}, err
	}
	log.dropNewest(cost)
	counts := countsOf(log, windows, nowMs)
	allowed := fits(counts, windows, cost)
	if allowed {
		for i := range counts {
			counts[i] += cost
		}
	}
	verdict := localVerdict(log, windows, counts, nowMs, cost, allowed, allowed)
	l.keep(key, log)
	return verdict, nil
}

// forget drops key's log (a reset).
func (l *localLimiter) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if element, ok := l.logs[key]; ok {
		l.order.Remove(element)
		delete(l.logs, key)
	}
}

// trimmed takes key's log out (keep puts it back), without the entries
// that left the widest window.
func (l *localLimiter) trimmed(key string, windows []window, nowMs int64) (*entries, error) {
	if len(windows) > maxWindows {
		// As the module refuses the call, before anything changes.
		return nil, fmt.Errorf("windows: at most %d per call, not %d", maxWindows, len(windows))
	}
	log := &entries{}
	if element, ok := l.logs[key]; ok {
		log = l.order.Remove(element).(*keyed).log
		delete(l.logs, key)
	}
	log.dropThrough(nowMs - widestOf(windows))
	return log, nil
}

func (l *localLimiter) keep(key string, log *entries) {
	if log.len() == 0 || l.maxClients <= 0 {
		return
	}
	l.logs[key] = l.order.PushBack(&keyed{key: key, log: log})
	for len(l.logs) > l.maxClients {
		delete(l.logs, l.order.Remove(l.order.Front()).(*keyed).key)
	}
}

func widestOf(windows []window) int64 {
	widest := windows[0].ms
	for _, w := range windows[1:] {
		widest = max(widest, w.ms)
	}
	return widest
}

func countsOf(log *entries, windows []window, nowMs int64) []int64 {
	counts := make([]int64, len(windows))
	for i, w := range windows {
		counts[i] = int64(log.len() - log.countThrough(nowMs-w.ms))
	}
	return counts
}

func fits(counts []int64, windows []window, cost int64) bool {
	for i, w := range windows {
		if counts[i]+cost > w.limit {
			return false
		}
	}
	return true
}

// localVerdict is the module's reply: the window with the least left when
// admitted, the one that waits longest (-1, never, the longest) when
// denied.
func localVerdict(log *entries, windows []window, counts []int64, nowMs, cost int64, allowed, pending bool) swl.Verdict {
	type described struct{ limit, remaining, retry, windowMs int64 }
	var binding *described
	for i, w := range windows {
		count := counts[i]
		d := described{limit: w.limit, remaining: max(0, w.limit-count), retry: -1, windowMs: w.ms}
		if allowed {
			if binding == nil || d.remaining < binding.remaining {
				binding = &d
			}
			continue
		}
		if count+cost <= w.limit {
			continue
		}
		if cost <= w.limit {
			d.retry = 1
			if rank := int64(log.len()) - (w.limit - cost + 1); rank >= 0 && rank < int64(log.len()) {
				d.retry = max(1, untilLeft(log.at(int(rank)), w.ms, nowMs))
			}
		}
		if binding == nil || waitsLonger(d.retry, binding.retry) {
			binding = &d
		}
	}
	if binding == nil {
		retry := int64(1)
		if allowed {
			retry = -1
		}
		first := windows[0]
		binding = &described{limit: first.limit, remaining: max(0, first.limit-counts[0]), retry: retry, windowMs: first.ms}
	}
	widest := widestOf(windows)
	newest, has := int64(0), false
	if n := log.len(); n > 0 && log.at(n-1) > nowMs-widest {
		newest, has = log.at(n-1), true
	}
	if pending {
		newest, has = max(newest, nowMs), true
	}
	reset := int64(0)
	if has {
		reset = untilLeft(newest, widest, nowMs)
	}
	return swl.Verdict{
		Allowed:    allowed,
		Limit:      binding.limit,
		Remaining:  binding.remaining,
		RetryAfter: milliseconds(binding.retry),
		ResetAfter: milliseconds(reset),
		Window:     milliseconds(binding.windowMs),
	}
}
