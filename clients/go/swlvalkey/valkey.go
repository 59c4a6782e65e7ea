// Package swlvalkey adapts a valkey-go client (github.com/valkey-io/valkey-go)
// as the Doer of a redis-swl client, single node or cluster:
//
//	client := swl.New(swlvalkey.Adapt(vk))
//
// valkey-go sends a command again after a network error only where it is
// marked read-only or retryable; this adapter marks none, so a check or a
// refund that timed out is recorded at most once.
package swlvalkey

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// Adapt makes a valkey-go client the Doer of a redis-swl client. On a
// cluster it is also swl.Primaries: the function library is loaded on each
// primary.
func Adapt(client valkey.Client) swl.OnceDoer {
	return adapter{client: client}
}

type adapter struct {
	client valkey.Client
}

// ReplyError is an error reply from the server (ERR, WRONGTYPE, NOSCRIPT,
// ...), which the redis-swl client reads as "answered, and changed
// nothing", as it reads go-redis's redis.Error.
type ReplyError struct {
	*valkey.ValkeyError
}

// RedisError marks the error as the server's reply.
func (ReplyError) RedisError() {}

// Error is the reply as the server sent it. valkey-go drops a leading
// "ERR " (for servers that differ there); it is put back, so that errors
// read the same through every client and in the docs: a reply starts with
// its code, a word in capitals, and one that does not had "ERR".
func (e ReplyError) Error() string {
	message := e.ValkeyError.Error()
	code, _, _ := strings.Cut(message, " ")
	if code == "" || strings.TrimLeft(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != "" {
		return "ERR " + message
	}
	return message
}

func (e ReplyError) Unwrap() error { return e.ValkeyError }

func (a adapter) Do(ctx context.Context, args ...any) (any, error) {
	return a.do(ctx, a.client, args)
}

// DoOnce is Do: no command this adapter builds is sent again.
func (a adapter) DoOnce(ctx context.Context, args ...any) (any, error) {
	return a.do(ctx, a.client, args)
}

func (a adapter) do(ctx context.Context, client valkey.Client, args []any) (any, error) {
	if len(args) == 0 {
		return nil, errNoCommand
	}
	words := make([]string, len(args))
	for i, arg := range args {
		words[i] = text(arg)
	}
	head, keys, rest := split(words)
	command := client.B().Arbitrary(head...).Keys(keys...).Args(rest...).Build()
	reply, err := client.Do(ctx, command).ToAny()
	if err == nil {
		return reply, nil
	}
	if valkey.IsValkeyNil(err) {
		return nil, nil
	}
	if reply, ok := valkey.IsValkeyErr(err); ok {
		return nil, ReplyError{reply}
	}
	return nil, err
}

var errNoCommand = errors.New("swlvalkey: no command")

// split is a command of the redis-swl client as valkey-go builds it: the
// words before its keys, its keys (which route it on a cluster) and the
// rest. The module's packages send SWL.* commands, DEL, GET and SET with
// one key after the name, FCALL and FCALL_RO with their key count, and
// FUNCTION with none.
func split(words []string) (head, keys, rest []string) {
	name := strings.ToUpper(words[0])
	switch {
	case strings.HasPrefix(name, "SWL.") || name == "DEL" || name == "GET" || name == "SET":
		if len(words) > 1 {
			return words[:1], words[1:2], words[2:]
		}
	case name == "FCALL" || name == "FCALL_RO":
		if len(words) > 2 {
			n, err := strconv.Atoi(words[2])
			if err == nil && n >= 0 && 3+n <= len(words) {
				return words[:3], words[3 : 3+n], words[3+n:]
			}
		}
	}
	return words, nil, nil
}

// text is an argument as the client passes it: strings and integers.
func text(arg any) string {
	switch v := arg.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	}
	return fmt.Sprint(arg)
}

// ForEachPrimary calls fn with each primary of a cluster (asking each node
// its ROLE), or with the one server.
func (a adapter) ForEachPrimary(ctx context.Context, fn func(ctx context.Context, node swl.Doer) error) error {
	if a.client.Mode() != valkey.ClientModeCluster {
		return fn(ctx, a)
	}
	for _, node := range a.client.Nodes() {
		role, err := node.Do(ctx, node.B().Arbitrary("ROLE").Build()).ToArray()
		if err != nil {
			return err
		}
		if len(role) == 0 {
			continue
		}
		if name, err := role[0].ToString(); err != nil || name != "master" {
			continue
		}
		if err := fn(ctx, adapter{client: node}); err != nil {
			return err
		}
	}
	return nil
}
