//go:build !unix

package server

// defaultMaxConnections is max_connections' default where the open-file
// limit cannot be read: 16384, a typical Windows socket budget.
func defaultMaxConnections() int { return 16384 }
