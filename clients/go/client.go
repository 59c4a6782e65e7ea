package swl

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// A command of the module and the function that answers it in the library.
type names struct {
	command  string
	function string
	// It changes the log: a second one records (or gives back) twice.
	changes bool
}

var (
	check   = names{"SWL.CHECK", "swl_check", true}
	peek    = names{"SWL.PEEK", "swl_peek", false}
	refund  = names{"SWL.REFUND", "swl_refund", true}
	entries = names{"SWL.ENTRIES", "swl_entries", false}
)

// probe is what a client sends once, before its first call, to learn
// whether the server has the module: SWL.CHECK without its arguments.
// Redis refuses it for its arity before it looks at ACLs or at a
// cluster's slots, so it records nothing and needs no permission:
// "unknown command" without the module, "wrong number of arguments" with
// it.
const probe = "SWL.CHECK"

// Client is sliding-window-log rate limiting on Redis: [Client.Check],
// [Client.Peek] and [Client.Refund], each returning a [Verdict], with
// [Client.Reset] and [Client.Entries]. It is safe for concurrent use.
//
// Each call is one command: SWL.CHECK, SWL.PEEK or SWL.REFUND where the
// server has the module, otherwise FCALL of the function library, which
// the client loads itself (FUNCTION LOAD, on a cluster on each primary)
// where it is missing. The replies are the same either way. Which it is,
// the client learns once, before its first call, from SWL.CHECK sent
// without arguments (refused for its arity, or as unknown); calls made
// meanwhile wait for that answer (and fail with its error if it failed:
// the next call probes again).
//
// A check or refund is sent once: not again after a timeout or a lost
// connection. Such a failure is an [*UncertainOutcomeError]: the request
// may or may not have been recorded.
type Client struct {
	doer     Doer
	encoding Encoding
	denials  *DenialCache

	usesLibrary atomic.Bool
	probed      atomic.Bool
	// Held by the call that probes; the others wait for it.
	probing chan struct{}
	// Probes that failed, and the last one's error (written while probing
	// is held): the calls that waited for it fail with it rather than each
	// probing in turn.
	probesFailed atomic.Uint64
	probeErr     error
}

// Option configures a [Client].
type Option func(*Client)

// WithEncoding sets how the function library, where this client loads it,
// stores new logs (Compact by default). The module's own setting is
// swl.encoding.
func WithEncoding(encoding Encoding) Option {
	return func(c *Client) { c.encoding = encoding }
}

// WithDenialCache answers checks after a denial without Redis: a check
// like one Redis denied (the same key and windows, at least its cost) is
// denied from cache until the denial's wait has passed; a check with
// [Penalize] or [NowMs] neither uses nor fills it, and a refund or reset
// through the client drops the key's denials (none by default).
func WithDenialCache(cache *DenialCache) Option {
	return func(c *Client) { c.denials = cache }
}

// New is a client sending its commands through doer ([GoRedis] adapts a
// go-redis client).
func New(doer Doer, options ...Option) *Client {
	c := &Client{doer: doer, encoding: Compact, probing: make(chan struct{}, 1)}
	for _, option := range options {
		option(c)
	}
	LibrarySource(c.encoding) // panics now for an unknown encoding
	return c
}

// UsesLibrary is true once the server answered that it has no module: the
// client then calls the function library.
func (c *Client) UsesLibrary() bool {
	return c.usesLibrary.Load()
}

// request is what a call adds to the key, window and limit.
type request struct {
	cost     int64
	windows  [][2]int64
	nowMs    int64
	hasNow   bool
	penalize bool
	oldest   bool
	err      error
}

// RequestOption adds to a call: its cost, further windows, its time, and
// PENALIZE (check) or OLDEST (peek).
type RequestOption func(*request)

// Cost makes the request weigh n units (1 to 100000; 1 by default).
func Cost(n int64) RequestOption {
	return func(r *request) { r.cost = n }
}

// Window adds another window on the same log: every window must admit.
// window is a whole number of milliseconds.
func Window(window time.Duration, limit int64) RequestOption {
	return func(r *request) {
		ms, err := windowMs(window)
		if err != nil && r.err == nil {
			r.err = err
		}
		r.windows = append(r.windows, [2]int64{ms, limit})
	}
}

// NowMs sets the request's time, Unix milliseconds (the server's clock by
// default).
func NowMs(ms int64) RequestOption {
	return func(r *request) { r.nowMs, r.hasNow = ms, true }
}

// At sets the request's time to t, in whole milliseconds (the server's
// clock by default).
func At(t time.Time) RequestOption {
	return NowMs(t.UnixMilli())
}

// Penalize (SWL.CHECK only) records a denied request too.
func Penalize() RequestOption {
	return func(r *request) { r.penalize = true }
}

// Oldest (SWL.PEEK only) adds OldestAfter to the verdict.
func Oldest() RequestOption {
	return func(r *request) { r.oldest = true }
}

func windowMs(window time.Duration) (int64, error) {
	if window < time.Millisecond || window%time.Millisecond != 0 {
		return 0, fmt.Errorf("swl: a window must be a whole number of milliseconds, at least 1ms, not %v", window)
	}
	return window.Milliseconds(), nil
}

// args are the arguments after the key, as the module and the library
// take them.
func args(window time.Duration, limit int64, options []RequestOption) ([]any, error) {
	r := request{cost: 1}
	for _, option := range options {
		option(&r)
	}
	ms, err := windowMs(window)
	if err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	now := "*"
	if r.hasNow {
		now = strconv.FormatInt(r.nowMs, 10)
	}
	list := []any{ms, limit, now}
	if r.cost != 1 {
		list = append(list, "COST", r.cost)
	}
	for _, w := range r.windows {
		list = append(list, "WINDOW", w[0], w[1])
	}
	if r.penalize {
		list = append(list, "PENALIZE")
	}
	if r.oldest {
		list = append(list, "OLDEST")
	}
	return list, nil
}

// Check checks a request (of one unit, or [Cost]) against limit per window
// (and any further [Window]s) and records it if admitted.
func (c *Client) Check(ctx context.Context, key string, window time.Duration, limit int64, options ...RequestOption) (Verdict, error) {
	if c.denials == nil {
		return c.run(ctx, check, key, window, limit, options)
	}
	r := request{cost: 1}
	for _, option := range options {
		option(&r)
	}
	if r.penalize || r.hasNow {
		return c.run(ctx, check, key, window, limit, options)
	}
	windows := []WindowLimit{{Window: window, Limit: limit}}
	for _, w := range r.windows {
		windows = append(windows, WindowLimit{Window: time.Duration(w[0]) * time.Millisecond, Limit: w[1]})
	}
	if verdict, ok := c.denials.Answer(key, windows, r.cost, time.Now()); ok {
		return verdict, nil
	}
	ticket, sent := c.denials.Ticket(), time.Now()
	verdict, err := c.run(ctx, check, key, window, limit, options)
	if err == nil {
		c.denials.Keep(key, windows, r.cost, verdict, ticket, sent)
	}
	return verdict, err
}

// Peek is what [Client.Check] would reply now, changing nothing. With
// [Oldest], the verdict's OldestAfter is set too.
func (c *Client) Peek(ctx context.Context, key string, window time.Duration, limit int64, options ...RequestOption) (Verdict, error) {
	return c.run(ctx, peek, key, window, limit, options)
}

// Refund gives back up to the cost (one unit, or [Cost]) of the newest
// recorded units (a request that should not count after all), and replies
// what [Client.Peek] replies then.
func (c *Client) Refund(ctx context.Context, key string, window time.Duration, limit int64, options ...RequestOption) (Verdict, error) {
	// Also when it failed: it may have been carried out.
	defer c.denials.Forget(key)
	return c.run(ctx, refund, key, window, limit, options)
}

// maxLimit is a limit no log reaches, for counting what a log holds: 10^15
// (the module takes up to 2^53 - 1, but replies near that lose digits in
// some clients).
const maxLimit = 1_000_000_000_000_000

// Usage is what a log holds in a window.
type Usage struct {
	// Units is the units recorded in the window.
	Units int64
	// ResetAfter is when the newest entry leaves the window (0 when it
	// holds none).
	ResetAfter time.Duration
}

// Units is the units key's log holds in the last window: a peek against a
// limit no log reaches, whose remaining counts them.
func (c *Client) Units(ctx context.Context, key string, window time.Duration) (int64, error) {
	counted, err := c.Peek(ctx, key, window, maxLimit)
	if err != nil {
		return 0, err
	}
	return maxLimit - 1 - counted.Remaining, nil
}

// Usage is the units key's log holds in the last window, and when its
// newest entry leaves that window: two peeks, sent together.
func (c *Client) Usage(ctx context.Context, key string, window time.Duration) (Usage, error) {
	type newest struct {
		verdict Verdict
		err     error
	}
	log := make(chan newest, 1)
	go func() {
		v, err := c.Peek(ctx, key, window, 0)
		log <- newest{v, err}
	}()
	units, err := c.Units(ctx, key, window)
	last := <-log
	if err != nil {
		return Usage{}, err
	}
	if last.err != nil {
		return Usage{}, last.err
	}
	return Usage{Units: units, ResetAfter: last.verdict.ResetAfter}, nil
}

// Reset deletes key's log (DEL), so that its client starts afresh. It is
// sent once, as a check is: an [*UncertainOutcomeError] where no reply
// came.
func (c *Client) Reset(ctx context.Context, key string) error {
	defer c.denials.Forget(key)
	_, err := c.send(ctx, true, "DEL", key)
	return c.failed("DEL", key, true, err)
}

// Entries is key's log: its entries' times, oldest first, as Unix
// milliseconds (SWL.ENTRIES); none for no key. A sorted set with a score
// another tool wrote that is not a whole number fails with
// [ErrUnexpectedReply].
func (c *Client) Entries(ctx context.Context, key string) ([]int64, error) {
	reply, err := c.call(ctx, entries, key, nil)
	if err != nil {
		return nil, err
	}
	return entriesOf(reply)
}

func (c *Client) run(ctx context.Context, n names, key string, window time.Duration, limit int64, options []RequestOption) (Verdict, error) {
	list, err := args(window, limit, options)
	if err != nil {
		return Verdict{}, err
	}
	reply, err := c.call(ctx, n, key, list)
	if err != nil {
		return Verdict{}, err
	}
	return verdictOf(reply)
}

// call sends n's command where the server has the module, its function
// otherwise, loading the library where it is missing.
func (c *Client) call(ctx context.Context, n names, key string, list []any) (any, error) {
	if err := c.waitForProbe(ctx); err != nil {
		return nil, err
	}
	if !c.usesLibrary.Load() {
		command := append([]any{n.command, key}, list...)
		reply, err := c.send(ctx, n.changes, command...)
		if !isUnknownCommand(err) {
			return reply, c.failed(n.command, key, n.changes, err)
		}
		// The module went away (an unknown command is not carried out).
		c.usesLibrary.Store(true)
	}
	fcall := append([]any{"FCALL", n.function, 1, key}, list...)
	reply, err := c.send(ctx, n.changes, fcall...)
	if !isMissingFunction(err) {
		return reply, c.failed(n.function, key, n.changes, err)
	}
	if err := c.LoadLibrary(ctx, false); err != nil {
		return nil, err
	}
	reply, err = c.send(ctx, n.changes, fcall...)
	if isMissingFunction(err) {
		// A library was there already, from before this function:
		// replaced by this one, which has every function it had (unless
		// it is newer, which stays, and the call fails).
		if err := c.LoadLibrary(ctx, true); err != nil {
			return nil, err
		}
		reply, err = c.send(ctx, n.changes, fcall...)
	}
	return reply, c.failed(n.function, key, n.changes, err)
}

// send sends a command, once (through DoOnce, where the Doer has it) if
// once. A context already done sends nothing.
func (c *Client) send(ctx context.Context, once bool, command ...any) (any, error) {
	if !once {
		return c.doer.Do(ctx, command...)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if doer, ok := c.doer.(OnceDoer); ok {
		return doer.DoOnce(ctx, command...)
	}
	return c.doer.Do(ctx, command...)
}

// failed is the error of a command that failed: an uncertain outcome where
// it changes the log and may have been carried out.
func (c *Client) failed(name, key string, changes bool, err error) error {
	if err == nil || !changes || unsent(err) {
		return err
	}
	return &UncertainOutcomeError{Command: name, Key: key, Err: err}
}

// waitForProbe probes, or waits for the probe another call is sending.
func (c *Client) waitForProbe(ctx context.Context) error {
	if c.probed.Load() {
		return nil
	}
	failed := c.probesFailed.Load()
	select {
	case c.probing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.probing }()
	if c.probed.Load() {
		return nil
	}
	if c.probesFailed.Load() != failed {
		return c.probeErr
	}
	library, err := c.probe(ctx)
	if err != nil {
		c.probeErr = err
		c.probesFailed.Add(1)
		return err
	}
	if library {
		c.usesLibrary.Store(true)
	}
	c.probed.Store(true)
	return nil
}

// probe tells whether the server lacks the module: SWL.CHECK without
// arguments, sent once so that a stalled server costs one timeout, refused
// as an unknown command, or (the module) for its arity. Any other failure
// (a timeout, a lost connection) is returned as it is, and decides
// nothing.
func (c *Client) probe(ctx context.Context) (bool, error) {
	_, err := c.send(ctx, true, probe)
	if err == nil {
		return false, nil
	}
	if !isReply(err) {
		return false, err
	}
	if !isUnknownCommand(err) {
		return false, nil
	}
	// No module: the library is loaded before any call goes to it, so
	// that calls keep their order. A server that refuses the version check
	// or the load is left to the call, which loads it, if it can, when
	// FCALL finds it missing.
	if err := c.LoadLibrary(ctx, false); err != nil && !isReply(err) {
		return false, err
	}
	return true, nil
}

// LoadLibrary loads the function library (on a cluster, on every primary),
// or with replace replaces an older one. A library already loaded is left.
//
// Before it loads anything on a node, it asks the node which release its
// library is (FCALL_RO swl_version 0): a library newer than the one this
// module carries is never replaced, replace or not, and is used as it is.
// One from before 0.4, which cannot say, counts as older. With replace, a
// node that answers neither a version nor "function not found" fails the
// call with its error, and nothing is replaced there.
func (c *Client) LoadLibrary(ctx context.Context, replace bool) error {
	if nodes, ok := c.doer.(Primaries); ok {
		return nodes.ForEachPrimary(ctx, func(ctx context.Context, node Doer) error {
			return c.loadOn(ctx, node, replace)
		})
	}
	return c.loadOn(ctx, c.doer, replace)
}

func (c *Client) loadOn(ctx context.Context, node Doer, replace bool) error {
	answer, err := node.Do(ctx, "FCALL_RO", "swl_version", 0)
	loaded, has := "", false
	switch {
	case err == nil:
		version, ok := answer.(string)
		if !ok {
			return unexpected(answer)
		}
		loaded, has = version, true
	case isMissingFunction(err):
		// None there, or one from before 0.4.
	case !replace && isReply(err):
		// FUNCTION LOAD without REPLACE leaves a loaded library as it
		// is: only a replace needs to know which one is there.
	default:
		return err
	}
	if has && (!replace || isNewer(loaded, LibraryVersion())) {
		return nil
	}
	command := []any{"FUNCTION", "LOAD"}
	if replace {
		command = append(command, "REPLACE")
	}
	command = append(command, LibrarySource(c.encoding))
	if _, err := node.Do(ctx, command...); err != nil && !isLibraryPresent(err) {
		return err
	}
	return nil
}
