package accesslog

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestUTCMillis: appendUTCMillis writes what time.Format's RFC 3339
// millisecond layout writes, for instants in every zone, at the year's
// edges and at the last nanosecond of a millisecond (truncated, not
// rounded).
func TestUTCMillis(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	times := []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2026, 3, 29, 2, 30, 0, 1_999_999, berlin),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), // the layout's fallback
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		times = append(times, time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).In(berlin))
	}
	for _, tm := range times {
		want := tm.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		if got := string(appendUTCMillis(nil, tm)); got != want {
			t.Fatalf("%v: got %q, want %q", tm, got, want)
		}
	}
}

// TestThousandths: appendThousandths writes what strconv's 'f', 3 writes
// of n/1000, negative values and large ones included.
func TestThousandths(t *testing.T) {
	ns := []int64{0, 1, -1, 999, 1000, -1000, 1001, 123456789, -987654321, 1 << 50}
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		ns = append(ns, r.Int64N(1<<40)-1<<39)
	}
	for _, n := range ns {
		want := strconv.FormatFloat(float64(n)/1e3, 'f', 3, 64)
		if got := string(appendThousandths(nil, n)); got != want {
			t.Fatalf("%d: got %q, want %q", n, got, want)
		}
	}
}

// TestJSONString: what appendJSONString writes parses (encoding/json) back
// to the input with each invalid UTF-8 byte as U+FFFD, and keeps '<', '>'
// and '&' as they are.
func TestJSONString(t *testing.T) {
	inputs := []string{"", "plain /api/v1/items?x=1", `q"uo\te`, "tab\tnl\ncr\r\x00\x1f\x7f",
		"ünïcode ✓ 𝄞", "bad \xff\xfe utf8 \xe2\x82", "<script>&</script>", strings.Repeat("a", 300) + "\""}
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		inputs = append(inputs, string(b))
	}
	for _, in := range inputs {
		out := appendJSONString(nil, in)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: %s does not parse: %v", in, out, err)
		}
		if want := validUTF8(in); got != want {
			t.Fatalf("%q: parsed back as %q, want %q", in, got, want)
		}
		if strings.Contains(in, "<") && !strings.Contains(string(out), "<") {
			t.Fatalf("%q: '<' escaped in %s", in, out)
		}
	}
}

// validUTF8 is s with each byte that does not start a valid UTF-8
// sequence replaced by U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError is U+FFFD
		i += size
	}
	return b.String()
}
