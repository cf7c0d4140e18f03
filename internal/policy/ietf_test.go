package policy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

// TestPartitionKeyIsHMAC: pk is the base64 of HMAC-SHA256's first 16
// bytes as crypto/hmac computes it, for short, block-sized and long
// secrets and keys, and computing it allocates nothing.
func TestPartitionKeyIsHMAC(t *testing.T) {
	for _, secret := range []string{"", "s3cret", strings.Repeat("k", 64), strings.Repeat("long", 40)} {
		pk := newPartitionKey([]byte(secret))
		for _, key := range []string{"rl:v2:{ip:192.0.2.7}:api:tb", strings.Repeat("x", 300)} {
			m := hmac.New(sha256.New, []byte(secret))
			m.Write([]byte(key))
			want := ":" + base64.StdEncoding.EncodeToString(m.Sum(nil)[:16]) + ":"
			if got := string(pk.appendTo(nil, key)); got != want {
				t.Errorf("secret %d B, key %d B: %s, want %s", len(secret), len(key), got, want)
			}
		}
	}
	pk := newPartitionKey([]byte("s3cret"))
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = pk.appendTo(buf[:0], "rl:v2:{ip:192.0.2.7}:api:tb") }); n != 0 {
		t.Errorf("%v allocations per pk", n)
	}
}
