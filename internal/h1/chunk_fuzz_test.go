package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http/httputil"
	"testing"
	"time"

	"rlproxy/internal/testutil/memconn"
)

// FuzzChunkedBody compares the chunked decoder with net/http's reading
// of the same bytes: whatever this one accepts net/http reads to the same
// data, and whatever net/http refuses this one refuses. This one may
// refuse more (a bare LF, an extension out of grammar).
func FuzzChunkedBody(f *testing.F) {
	for _, s := range []string{
		"5\r\nhello\r\n0\r\n\r\n",
		"5;a=b;c=\"d\"\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
		"5x\r\nhello\r\n0\r\n\r\n",
		"3\r\nhello\r\n0\r\n\r\n",
		"5\nhello\n0\n\n",
		"ffffffffffffffff\r\n",
		"0 \r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	var body Body
	f.Fuzz(func(t *testing.T, b []byte) {
		var mine bytes.Buffer
		rd := newReader(&memconn.Conn{Msg: b, N: 1}, DefaultMaxHead, time.Now)
		body.reset(rd, Chunked, 0, DefaultMaxHead)
		_, err := io.Copy(&mine, &body)
		std, stdErr := io.ReadAll(httputil.NewChunkedReader(bufio.NewReader(bytes.NewReader(b))))
		switch {
		case err == nil && stdErr != nil:
			t.Fatalf("accepted %q, net/http refuses: %v", b, stdErr)
		case err == nil && !bytes.Equal(mine.Bytes(), std):
			t.Fatalf("%q: data %q, net/http %q", b, mine.Bytes(), std)
		case err != nil && !errors.As(err, new(Reason)):
			t.Fatalf("%q: error %v is not a Reason", b, err)
		}
	})
}
