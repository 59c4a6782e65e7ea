package swl_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// The embedded swl.lua is the repository's scripts/swl.lua: after a change
// there, go generate copies it anew.
func TestLibraryCopyIsCurrent(t *testing.T) {
	original, err := os.ReadFile(filepath.Join("..", "..", "scripts", "swl.lua"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("not in the repository: no scripts/swl.lua to compare with")
	}
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile("swl.lua")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(copied, original) {
		t.Fatal("clients/go/swl.lua differs from scripts/swl.lua: run go generate in clients/go, and commit swl.lua")
	}
	if swl.LibrarySource(swl.Compact) != string(original) {
		t.Fatal("the embedded library is not swl.lua")
	}
}

func TestLibrarySource(t *testing.T) {
	for encoding, line := range map[swl.Encoding]string{
		swl.Compact:  "\nlocal ENCODING = 'compact'\n",
		swl.Zset:     "\nlocal ENCODING = 'zset'\n",
		swl.Compact1: "\nlocal ENCODING = 'compact1'\n",
	} {
		if source := swl.LibrarySource(encoding); !strings.Contains(source, line) || !strings.HasPrefix(source, "#!lua name=swl\n") {
			t.Errorf("%v: no %q", encoding, line)
		}
	}
	if !strings.Contains(swl.LibrarySource(swl.Compact), "\nlocal VERSION = '"+swl.LibraryVersion()+"'\n") {
		t.Fatalf("version %q", swl.LibraryVersion())
	}
}

// libraryOf is the packaged library, saying it is version.
func libraryOf(t *testing.T, version string) string {
	own := "\nlocal VERSION = '" + swl.LibraryVersion() + "'\n"
	source := swl.LibrarySource(swl.Compact)
	if !strings.Contains(source, own) {
		t.Fatal("no VERSION line")
	}
	return strings.Replace(source, own, "\nlocal VERSION = '"+version+"'\n", 1)
}

// withoutSwlVersion is source without swl_version, as a library from
// before 0.4.
func withoutSwlVersion(t *testing.T, source string) string {
	start := strings.Index(source, "\nredis.register_function { function_name = 'swl_version'")
	if start < 0 {
		t.Fatal("swl_version is not registered")
	}
	end := strings.IndexByte(source[start+1:], '\n') + start + 1
	return source[:start] + source[end:]
}

func (s *server) loadedCode() string {
	s.TB().Helper()
	libraries := s.Do("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "swl").([]any)
	if len(libraries) != 1 {
		s.TB().Fatalf("libraries: %v", libraries)
	}
	// RESP3: a map of the library's fields.
	return libraries[0].(map[any]any)["library_code"].(string)
}

func (s *server) loadedVersion() string {
	s.TB().Helper()
	version, err := s.Raw.Do(ctx, "FCALL_RO", "swl_version", 0).Text()
	if err != nil {
		return "error: " + err.Error()
	}
	return version
}

// serving is a server (no module) with code loaded as its library, and a
// client of it whose first check uses that library as it is, as any
// library loaded already.
func serving(t *testing.T, code string) (*server, *swl.Client) {
	s := startServer(t, false, swl.Compact)
	s.Do("FUNCTION", "LOAD", code)
	client := s.swl()
	v, err := client.Check(ctx, "k", time.Second, 3)
	if err != nil || !v.Allowed {
		t.Fatalf("%+v %v", v, err)
	}
	return s, client
}

func TestNewerLibraryIsNeverReplaced(t *testing.T) {
	newer := libraryOf(t, "9.9.9")
	s, client := serving(t, newer)
	for _, replace := range []bool{false, true} {
		if err := client.LoadLibrary(ctx, replace); err != nil {
			t.Fatal(err)
		}
	}
	// Asked each time (and once by the first check's probe, which found
	// no module), and nothing loaded but the test's own.
	if calls, _ := s.Calls("fcall_ro"); calls != 3 {
		t.Fatalf("%d versions asked", calls)
	}
	if calls, _ := s.Calls("function|load"); calls != 1 {
		t.Fatalf("%d loads", calls)
	}
	if s.loadedCode() != newer || s.loadedVersion() != "9.9.9" {
		t.Fatal("the newer library was replaced")
	}
	v, err := client.Check(ctx, "k", time.Second, 3)
	if err != nil || v.Remaining != 1 {
		t.Fatalf("%+v %v", v, err)
	}
}

func TestNewerLibraryWithoutAFunctionIsKept(t *testing.T) {
	// A client replaces a library that lacks a function it calls, unless
	// the library is newer than its own: the call fails instead.
	newer := strings.Replace(libraryOf(t, "9.9.9"), "'swl_peek'", "'swl_peek_renamed'", 1)
	s, client := serving(t, newer)
	_, err := client.Peek(ctx, "k", time.Second, 3)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "function not found") {
		t.Fatalf("%v", err)
	}
	if s.loadedCode() != newer {
		t.Fatal("the newer library was replaced")
	}
}

func TestOlderLibraryIsUsedAndReplacedOnRequest(t *testing.T) {
	for _, older := range []struct{ code, answer string }{
		{libraryOf(t, "0.0.1"), "0.0.1"},
		{withoutSwlVersion(t, libraryOf(t, "0.3.0")), "error: ERR Function not found"},
	} {
		s, client := serving(t, older.code)
		if err := client.LoadLibrary(ctx, false); err != nil {
			t.Fatal(err)
		}
		if s.loadedCode() != older.code || s.loadedVersion() != older.answer {
			t.Fatalf("replaced without a request: %s", s.loadedVersion())
		}
		// Replaced on request, as after an upgrade.
		if err := client.LoadLibrary(ctx, true); err != nil {
			t.Fatal(err)
		}
		if s.loadedCode() != swl.LibrarySource(swl.Compact) || s.loadedVersion() != swl.LibraryVersion() {
			t.Fatalf("not replaced: %s", s.loadedVersion())
		}
	}
}

func TestOlderLibraryWithoutAFunctionIsReplaced(t *testing.T) {
	s := startServer(t, false, swl.Compact)
	older := strings.Replace(withoutSwlVersion(t, libraryOf(t, "0.2.0")), "'swl_peek'", "'swl_peek_old'", 1)
	s.Do("FUNCTION", "LOAD", older)
	v, err := s.swl().Peek(ctx, "k", time.Second, 3)
	if err != nil || !v.Allowed {
		t.Fatalf("%+v %v", v, err)
	}
	if s.loadedVersion() != swl.LibraryVersion() {
		t.Fatalf("not replaced: %s", s.loadedVersion())
	}
}

// The library a client loads creates logs in its encoding; the module's
// own setting decides where it is loaded.
func TestEncodingOfTheLibrary(t *testing.T) {
	for _, encoding := range []swl.Encoding{swl.Zset, swl.Compact, swl.Compact1} {
		s := startServer(t, false, swl.Compact)
		if _, err := s.swl(swl.WithEncoding(encoding)).Check(ctx, "k", time.Second, 3); err != nil {
			t.Fatal(err)
		}
		kind := s.Do("TYPE", "k").(string)
		if want := map[swl.Encoding]string{swl.Zset: "zset"}[encoding]; want == "" && kind != "string" || want != "" && kind != want {
			t.Fatalf("%v: a %s", encoding, kind)
		}
		if s.loadedCode() != swl.LibrarySource(encoding) {
			t.Fatalf("%v: another library", encoding)
		}
	}
}
