package e2e

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Reset is h2Exchange's status when the server reset the stream or the
// connection (RST_STREAM, GOAWAY, EOF) instead of answering.
const h2Reset = -1

// h2Dial opens a connection speaking HTTP/2: with prior knowledge (h2c)
// to a plain addr, or negotiated by ALPN over TLS when cfg is not nil.
func h2Dial(t *testing.T, addr string, cfg *tls.Config) net.Conn {
	t.Helper()
	if cfg == nil {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		c.Close()
		t.Fatalf("ALPN negotiated %q, want h2", p)
	}
	return c
}

// h2Exchange sends one request on a fresh HTTP/2 connection as raw frames
// — the preface, SETTINGS, one HEADERS block holding fields exactly as
// given (no client-side validation: net/http's transport would refuse
// some of them before sending), and body as one DATA frame when not "" —
// and returns the response's :status, or h2Reset.
func h2Exchange(t *testing.T, conn net.Conn, fields []hpack.HeaderField, body string) int {
	t.Helper()
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range fields {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	err := fr.WriteSettings()
	if err == nil {
		err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: body == "", EndHeaders: true})
	}
	if err == nil && body != "" {
		err = fr.WriteData(1, true, []byte(body))
	}
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return h2Reset
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if s, _ := strconv.Atoi(f.PseudoValue("status")); f.StreamID == 1 && s >= 200 {
				return s
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return h2Reset
			}
		case *http2.GoAwayFrame:
			return h2Reset
		}
	}
}

// h2Fields builds a header block from name, value pairs, in order.
func h2Fields(kv ...string) []hpack.HeaderField {
	fs := make([]hpack.HeaderField, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		fs = append(fs, hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return fs
}
