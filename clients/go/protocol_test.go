package swl

// The client protocol (clients/spec/protocol.md) against its vectors
// (clients/vectors/protocol.json): for each case, the commands the client
// sends and what it makes of the replies. The stand-in is the one thing a
// client sends commands with, a Doer, answering as the vectors say: the
// vectors are the server.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

type protocolVectors struct {
	Cases []struct {
		Name  string
		Steps []struct {
			Call struct {
				Op       string
				Key      string
				WindowMs int64 `json:"window_ms"`
				Limit    int64
				NowMs    int64 `json:"now_ms"`
				Replace  bool
			}
			Exchanges []struct {
				Send    []string
				Reply   json.RawMessage
				Error   *string
				Timeout bool
			}
			Result struct {
				Verdict   []int64
				OK        bool
				Error     string
				Uncertain bool
			}
		}
	}
}

// replyError is an error reply as go-redis gives one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// scripted answers each command with the next exchange's reply.
type scripted struct {
	t        *testing.T
	expected []int
	sent     func(i int) ([]string, any, error)
}

func (s *scripted) Do(_ context.Context, args ...any) (any, error) {
	command := make([]string, len(args))
	for i, arg := range args {
		command[i] = fmt.Sprint(arg)
		if command[i] == LibrarySource(Compact) {
			command[i] = "$LIBRARY"
		}
	}
	if len(s.expected) == 0 {
		s.t.Fatalf("sent %q after the step's last exchange", command)
	}
	next := s.expected[0]
	s.expected = s.expected[1:]
	want, reply, err := s.sent(next)
	if !reflect.DeepEqual(command, want) {
		s.t.Fatalf("sent %q, want %q", command, want)
	}
	return reply, err
}

// fromJSON is a reply as go-redis gives it: int64, string, []any.
func fromJSON(raw json.RawMessage) any {
	var value any
	decoder := json.NewDecoder(strings.NewReader(string(raw)))
	decoder.UseNumber()
	if err := decoder.Decode(&value); err != nil {
		return nil
	}
	var convert func(any) any
	convert = func(v any) any {
		switch v := v.(type) {
		case json.Number:
			n, _ := v.Int64()
			return n
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				out[i] = convert(e)
			}
			return out
		}
		return v
	}
	return convert(value)
}

func TestTheClientSpeaksTheProtocol(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "vectors", "protocol.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors protocolVectors
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	for _, tc := range vectors.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			server := &scripted{t: t}
			client := New(server)
			ctx := context.Background()
			for n, step := range tc.Steps {
				where := fmt.Sprintf("step %d", n+1)
				server.expected = nil
				for i := range step.Exchanges {
					server.expected = append(server.expected, i)
				}
				exchanges := step.Exchanges
				server.sent = func(i int) ([]string, any, error) {
					e := exchanges[i]
					switch {
					case e.Error != nil:
						return e.Send, nil, replyError(*e.Error)
					case e.Timeout:
						return e.Send, nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
					}
					return e.Send, fromJSON(e.Reply), nil
				}
				call := step.Call
				var verdict Verdict
				var err error
				window := time.Duration(call.WindowMs) * time.Millisecond
				switch call.Op {
				case "check":
					verdict, err = client.Check(ctx, call.Key, window, call.Limit, NowMs(call.NowMs))
				case "peek":
					verdict, err = client.Peek(ctx, call.Key, window, call.Limit, NowMs(call.NowMs))
				case "refund":
					verdict, err = client.Refund(ctx, call.Key, window, call.Limit, NowMs(call.NowMs))
				case "load_library":
					err = client.LoadLibrary(ctx, call.Replace)
				default:
					t.Fatalf("%s: unknown op %q", where, call.Op)
				}
				result := step.Result
				switch {
				case result.Verdict != nil:
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
					ms := func(d time.Duration) int64 { return d.Milliseconds() }
					allowed := int64(0)
					if verdict.Allowed {
						allowed = 1
					}
					got := []int64{allowed, verdict.Limit, verdict.Remaining, ms(verdict.RetryAfter), ms(verdict.ResetAfter), ms(verdict.Window)}
					if !reflect.DeepEqual(got, result.Verdict) {
						t.Fatalf("%s: verdict %v, want %v", where, got, result.Verdict)
					}
				case result.OK:
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
				case result.Uncertain:
					if !errors.Is(err, ErrUncertainOutcome) {
						t.Fatalf("%s: %v is not an uncertain outcome", where, err)
					}
				default:
					if err == nil || errors.Is(err, ErrUncertainOutcome) ||
						!strings.Contains(strings.ToLower(err.Error()), strings.ToLower(result.Error)) {
						t.Fatalf("%s: error %v, want one with %q", where, err, result.Error)
					}
				}
				if len(server.expected) != 0 {
					t.Fatalf("%s: %d exchanges not sent", where, len(server.expected))
				}
			}
		})
	}
}
