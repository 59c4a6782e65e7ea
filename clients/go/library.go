package swl

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Run in this directory by go generate: the function library is the
// repository's scripts/swl.lua, and Go embeds only files of its own
// module, so the module carries a copy (a test fails while it differs).
//go:generate go run ./internal/copylibrary ../../scripts/swl.lua swl.lua

// library is the function library this module carries: swl.lua, a copy of
// the repository's scripts/swl.lua.
//
//go:embed swl.lua
var library string

const (
	encodingLine = "\nlocal ENCODING = 'compact'\n"
	versionLine  = "\nlocal VERSION = '"
)

// Encoding is how the function library stores the logs it creates. Where
// the module is loaded, its own swl.encoding setting decides.
type Encoding int

const (
	// Compact is a compact log: about 1 to 2 bytes per entry, in the
	// newest format the library writes (the default).
	Compact Encoding = iota
	// Zset is a sorted set, readable with ZRANGE and compatible with the
	// usual Lua script's keys.
	Zset
	// Compact1 is a compact log of format version 1, which redis-swl 0.3
	// reads too: for a fleet part way through an upgrade, while a 0.3
	// module, library or client still serves the keys.
	Compact1
)

// String is the name the module and the library use: "compact", "zset"
// or "compact1".
func (e Encoding) String() string {
	switch e {
	case Compact:
		return "compact"
	case Zset:
		return "zset"
	case Compact1:
		return "compact1"
	}
	return fmt.Sprintf("Encoding(%d)", int(e))
}

// LibrarySource is the function library's source, creating new logs in
// encoding: what the client loads with FUNCTION LOAD where the server has
// no module. It panics for an encoding other than Compact, Zset and
// Compact1.
func LibrarySource(encoding Encoding) string {
	switch encoding {
	case Compact:
		// The library as shipped creates compact logs.
		return library
	case Zset, Compact1:
		line := "\nlocal ENCODING = '" + encoding.String() + "'\n"
		return strings.Replace(library, encodingLine, line, 1)
	}
	panic("swl: unknown encoding " + encoding.String())
}

// LibraryVersion is the release of the function library this module
// carries: its VERSION line, which FCALL_RO swl_version 0 replies.
func LibraryVersion() string {
	start := strings.Index(library, versionLine)
	if start < 0 {
		panic("swl: swl.lua has no VERSION line")
	}
	start += len(versionLine)
	end := strings.IndexByte(library[start:], '\'')
	if end < 0 {
		panic("swl: swl.lua's VERSION line does not end")
	}
	return library[start : start+end]
}

// release is a release's major, minor and patch numbers, from the start of
// version ("0.4.0", "1.2", "0.5.0-rc.1"); false where it does not start
// with a number.
func release(version string) ([3]uint64, bool) {
	var numbers [3]uint64
	rest := strings.TrimSpace(version)
	for i := range numbers {
		if i > 0 {
			after, found := strings.CutPrefix(rest, ".")
			if !found || after == "" || !unicode.IsDigit(rune(after[0])) {
				break
			}
			rest = after
		}
		digits := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if digits < 0 {
			digits = len(rest)
		}
		number, err := strconv.ParseUint(rest[:digits], 10, 64)
		if err != nil {
			return numbers, false
		}
		numbers[i] = number
		rest = rest[digits:]
	}
	return numbers, true
}

// isNewer tells whether the loaded library's release is newer than own,
// comparing major, minor and patch as numbers. A version that does not
// start with a number is older than any.
func isNewer(loaded, own string) bool {
	theirs, ok := release(loaded)
	ours, ownOK := release(own)
	if !ok || !ownOK {
		return false
	}
	for i := range theirs {
		if theirs[i] != ours[i] {
			return theirs[i] > ours[i]
		}
	}
	return false
}
