//go:build unix

package server

import "syscall"

// defaultMaxConnections derives max_connections from the soft open-file
// limit (Go raises it to the hard limit at start on Linux); unknown or
// unlimited leaves a generous 1<<20.
func defaultMaxConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<40 {
		return 1 << 20
	}
	return deriveMaxConnections(uint64(rl.Cur))
}
