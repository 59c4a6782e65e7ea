package swl

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrUncertainOutcome is what every [*UncertainOutcomeError] is, for
// errors.Is.
var ErrUncertainOutcome = errors.New("swl: no reply, the command may or may not have been carried out")

// ErrUnexpectedReply is what a reply that is not redis-swl's fails with
// (wrapped, with the reply).
var ErrUnexpectedReply = errors.New("swl: not a redis-swl reply")

// UncertainOutcomeError is the error of a check, refund or reset that was
// sent and got no reply: it timed out, or the connection was lost while
// waiting. The server may or may not have carried it out, so the request
// may or may not have been recorded (or given back, or the log deleted).
// The client never sends it again by itself: a second SWL.CHECK records a
// second request. A peek or an entries call never fails with it: they
// change nothing.
//
// errors.Is(err, ErrUncertainOutcome) is true of it, and errors.As finds
// it; Unwrap gives the error the Doer returned (a timeout, io.EOF, ...).
type UncertainOutcomeError struct {
	// Command is the command or function sent: SWL.CHECK, swl_check, ...
	Command string
	// Key is the log's key.
	Key string
	// Err is the error the Doer returned.
	Err error
}

func (e *UncertainOutcomeError) Error() string {
	return fmt.Sprintf("swl: %s on %q got no reply, it may or may not have been carried out: %v",
		e.Command, e.Key, e.Err)
}

func (e *UncertainOutcomeError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUncertainOutcome) true.
func (e *UncertainOutcomeError) Is(target error) bool { return target == ErrUncertainOutcome }

// isReply tells whether err is the server's error reply (which changed
// nothing), as go-redis gives it.
func isReply(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply)
}

// unsent tells whether err surely came before the command was written:
// an error reply, a closed client, no connection from the pool, a failed
// dial. Anything else may have come after: a timeout, a lost connection.
func unsent(err error) bool {
	if isReply(err) {
		return true
	}
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrPoolExhausted) {
		return true
	}
	var dial *net.OpError
	return errors.As(err, &dial) && dial.Op == "dial"
}

func messageHas(err error, text string) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), text)
}

// isUnknownCommand: the server has no such command, the module is not
// loaded (an unknown command is not carried out).
func isUnknownCommand(err error) bool {
	return isReply(err) && messageHas(err, "unknown command")
}

// isMissingFunction: the server has no such function, the library is not
// loaded (or is one from before the function).
func isMissingFunction(err error) bool {
	return isReply(err) && messageHas(err, "function not found")
}

// isLibraryPresent: FUNCTION LOAD found the library loaded (by another
// client, meanwhile).
func isLibraryPresent(err error) bool {
	return isReply(err) && messageHas(err, "already exists")
}
