package h1

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// smuggled is the request the probes try to smuggle.
const smuggled = "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"

// smugglingCases are the probes: each raw request and what the backend
// may receive.
var smugglingCases = []struct {
	name, raw string
	want      []string // requests the backend receives; nil: at most the one whose body is refused
	status    string   // the first status line's code
}{
	{"CL.TE", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX" + smuggled, []string{}, "400"},
	{"TE.CL", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n" + smuggled, []string{}, "400"},
	{"TE.TE space before colon", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" + smuggled, []string{}, "400"},
	{"TE.TE xchunked", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + smuggled, []string{}, "400"},
	{"TE.TE twice", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n" + smuggled, []string{}, "400"},
	{"TE.TE list", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + smuggled, []string{}, "400"},
	{"TE.TE obs-fold", "POST /a HTTP/1.1\r\nHost: a\r\nX: y\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, []string{}, "400"},
	{"TE.TE tab value", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\tchunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" + smuggled, []string{}, "400"},
	{"TE HTTP/1.0", "POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n27\r\n" + smuggled + "\r\n0\r\n\r\n", []string{}, "400"},
	{"CL +5", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello" + smuggled, []string{}, "400"},
	{"CL list", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\nhello" + smuggled, []string{}, "400"},
	{"CL twice", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 0\r\n\r\nhello" + smuggled, []string{}, "400"},
	{"bare LF", "POST /a HTTP/1.1\r\nHost: a\nContent-Length: 0\r\n\r\n" + smuggled, []string{}, "400"},
	{"bare CR", "POST /a HTTP/1.1\r\nHost: a\rContent-Length: 5\r\n\r\nhello" + smuggled, []string{}, "400"},
	{"NUL", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\x00\r\n\r\nhello" + smuggled, []string{}, "400"},
	{"pipelined after refused", "GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx" + smuggled, []string{"GET /a"}, "200"},
	{"bad chunk size", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5x\r\nhello\r\n0\r\n\r\n" + smuggled, nil, "400"},
	{"chunk size overflow", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n" + smuggled, nil, "400"},
	{"chunk extension bare LF", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a\nb\r\nhello\r\n0\r\n\r\n" + smuggled, nil, "400"},
	{"chunk data overrun", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n" + smuggled, nil, "400"},
}

// TestSmugglingProbes sends the request-smuggling gadgets to a proxy on
// the engine in front of a real net/http backend over loopback: none
// reaches the backend as a second request, and each refused head is
// answered 400 with the connection closed.
func TestSmugglingProbes(t *testing.T) {
	cases := smugglingCases
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("ok"))
	})
	addr := startProxy(t, &Server{Handler: &testProxy{pool: &Pool{}, addr: hostOf(b.Server)}})
	for i, tc := range cases {
		path := "/c" + strconv.Itoa(i)
		raw := strings.ReplaceAll(tc.raw, " /a ", " "+path+" ")
		out := roundTrip(t, addr, raw)
		if !strings.HasPrefix(out, "HTTP/1.1 "+tc.status+" ") {
			t.Errorf("%s: answer %q, want status %s first", tc.name, out, tc.status)
		}
		if n := strings.Count(out, "HTTP/1.1 "); tc.want != nil && n != len(tc.want)+1 {
			t.Errorf("%s: %d answers, want %d: %q", tc.name, n, len(tc.want)+1, out)
		}
	}
	// Close waits for every request the backend received: a late one
	// is counted too.
	b.Close()
	all := b.requests()
	if slices.ContainsFunc(all, func(r string) bool { return strings.Contains(r, "smuggled") }) {
		t.Fatalf("backend received %q", all)
	}
	for i, tc := range cases {
		path := "/c" + strconv.Itoa(i)
		var got []string
		for _, r := range all {
			if strings.HasSuffix(r, " "+path) {
				got = append(got, strings.TrimSuffix(r, path)+"/a")
			}
		}
		want := tc.want
		if want == nil && len(got) == 1 {
			want = []string{"POST /a"} // the request whose body was refused
		}
		if len(got) != len(want) || len(got) > 0 && !slices.Equal(got, want) {
			t.Errorf("%s: backend received %q, want %q", tc.name, got, want)
		}
	}
}
