// Command copylibrary copies the function library into the Go module,
// which cannot embed a file outside its own directory: run by go generate
// in clients/go, it copies ../../scripts/swl.lua to swl.lua.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: copylibrary FROM TO")
		os.Exit(2)
	}
	source, err := os.ReadFile(os.Args[1])
	if err == nil {
		err = os.WriteFile(os.Args[2], source, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "copylibrary:", err)
		os.Exit(1)
	}
}
