package swl

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Verdict is one reply of SWL.CHECK, SWL.PEEK or SWL.REFUND, by name, as
// the Python, Node and Rust clients give it.
//
// Limit, Remaining and RetryAfter describe the window named by Window: the
// one with the least left, or the one that denied.
type Verdict struct {
	// Allowed: admitted (and, for a check, recorded).
	Allowed bool
	// Limit is the limit of the window the verdict describes.
	Limit int64
	// Remaining is the units left in that window.
	Remaining int64
	// RetryAfter is when a denied request would fit. It is -1ms (the
	// reply's -1) when admitted, or when waiting cannot help (a cost above
	// the limit): negative means none.
	RetryAfter time.Duration
	// ResetAfter is when the log's newest entry leaves the widest window
	// (0 for an empty log).
	ResetAfter time.Duration
	// Window is the window the verdict describes.
	Window time.Duration
	// OldestAfter is only set by a peek with [Oldest] (then HasOldestAfter
	// is true): when the oldest entry in that window leaves it.
	OldestAfter    time.Duration
	HasOldestAfter bool
}

// RetryAfterSeconds is whole seconds for a Retry-After header (rounded up),
// and false when admitted or when waiting cannot help.
func (v Verdict) RetryAfterSeconds() (int64, bool) {
	if v.RetryAfter < 0 {
		return 0, false
	}
	ms := v.RetryAfter.Milliseconds()
	return (ms + 999) / 1000, true
}

// maxDurationMs is the most milliseconds a time.Duration holds (about 292
// years); longer waits and windows, which only absurd windows and scores
// another tool wrote give, are that.
const maxDurationMs = math.MaxInt64 / int64(time.Millisecond)

func milliseconds(ms int64) time.Duration {
	if ms > maxDurationMs {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// verdictOf parses a reply of six integers (seven with OLDEST).
func verdictOf(reply any) (Verdict, error) {
	values, ok := reply.([]any)
	if !ok || (len(values) != 6 && len(values) != 7) {
		return Verdict{}, unexpected(reply)
	}
	numbers := make([]int64, len(values))
	for i, value := range values {
		number, ok := integer(value)
		if !ok {
			return Verdict{}, unexpected(reply)
		}
		numbers[i] = number
	}
	if numbers[0] != 0 && numbers[0] != 1 || numbers[1] < 0 || numbers[2] < 0 || numbers[5] < 1 {
		return Verdict{}, unexpected(reply)
	}
	verdict := Verdict{
		Allowed:    numbers[0] == 1,
		Limit:      numbers[1],
		Remaining:  numbers[2],
		RetryAfter: milliseconds(numbers[3]),
		ResetAfter: milliseconds(numbers[4]),
		Window:     milliseconds(numbers[5]),
	}
	if len(numbers) == 7 {
		verdict.OldestAfter = milliseconds(numbers[6])
		verdict.HasOldestAfter = true
	}
	return verdict, nil
}

// entriesOf parses SWL.ENTRIES' reply: whole milliseconds.
func entriesOf(reply any) ([]int64, error) {
	values, ok := reply.([]any)
	if !ok {
		return nil, unexpected(reply)
	}
	entries := make([]int64, len(values))
	for i, value := range values {
		entry, ok := integer(value)
		if !ok {
			return nil, fmt.Errorf("%w: entry %v is not a whole number of milliseconds (a score another tool wrote: read the sorted set with ZRANGE)",
				ErrUnexpectedReply, value)
		}
		entries[i] = entry
	}
	return entries, nil
}

func integer(value any) (int64, bool) {
	switch value := value.(type) {
	case int64:
		return value, true
	case string:
		number, err := strconv.ParseInt(value, 10, 64)
		return number, err == nil
	case float64:
		if value == math.Trunc(value) && math.Abs(value) <= 1<<53 {
			return int64(value), true
		}
	}
	return 0, false
}

func unexpected(reply any) error {
	return fmt.Errorf("%w: %#v", ErrUnexpectedReply, reply)
}
