package valkey

import (
	"context"
	"fmt"
	"strings"

	valkeygo "github.com/valkey-io/valkey-go"

	"rlproxy/internal/store"
)

// ClientKeys returns every key of one client id (e.g. "ip:192.0.2.7"):
// the keys "<KeyPrefix>v2:{<client>}:*" (store.KeyVersion) (docs/DESIGN.md "Key format"),
// scanned on every node (SCAN, not KEYS, so a large server is not
// blocked). For tests and the compare subcommand, not the request path.
// Errors: connecting, a failed SCAN.
func (s *Store) ClientKeys(ctx context.Context, client string) ([]string, error) {
	c, err := s.Client(ctx)
	if err != nil {
		return nil, err
	}
	pattern := globEscape(s.prefix+store.KeyVersion+"{"+client+"}:") + "*"
	var keys []string
	for addr, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, fmt.Errorf("scanning %s: %w", addr, err)
			}
			keys = append(keys, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return keys, nil
}

// MemoryUsage returns the bytes one client's keys take on the server: the
// sum of MEMORY USAGE ... SAMPLES 0 (exact, every element counted) over
// ClientKeys. The figure depends on the server version and encoding.
// Errors: those of ClientKeys, a failed MEMORY USAGE.
func (s *Store) MemoryUsage(ctx context.Context, client string) (int64, error) {
	keys, err := s.ClientKeys(ctx, client)
	if err != nil {
		return 0, err
	}
	c, err := s.Client(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, k := range keys {
		n, err := c.Do(ctx, c.B().MemoryUsage().Key(k).Samples(0).Build()).AsInt64()
		if valkeygo.IsValkeyNil(err) { // expired since the scan
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("measuring %s: %w", k, err)
		}
		total += n
	}
	return total, nil
}

// globEscape quotes the SCAN MATCH metacharacters in s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
