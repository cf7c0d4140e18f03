// Command valkeyscript prints rlproxy's Valkey decision script (the exact
// source the valkey store sends with EVAL), or with -sha its SHA-1, so that
// bench/valkey.sh can SCRIPT LOAD it and drive it with redis-benchmark
// EVALSHA: the server's ceiling for the same script and arguments.
package main

import (
	"flag"
	"fmt"
	"os"

	"rlproxy/internal/store/valkey"
)

func main() {
	sha := flag.Bool("sha", false, "print the script's SHA-1 (hex) instead of its source")
	flag.Parse()
	if *sha {
		fmt.Println(valkey.ScriptSHA())
		return
	}
	if _, err := os.Stdout.WriteString(valkey.Script()); err != nil {
		os.Exit(1)
	}
}
