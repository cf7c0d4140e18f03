package framing

import (
	"bytes"
	"strconv"
)

// headInfo is what a request head says about its framing.
type headInfo struct {
	http10  bool  // HTTP/1.0: Transfer-Encoding is ignored by net/http
	te      bool  // a Transfer-Encoding field
	cl      bool  // a Content-Length field
	length  int64 // its value
	fold    bool  // an obs-fold line
	switchs bool  // Upgrade or CONNECT: what follows may not be HTTP/1
	preface bool  // the HTTP/2 preface's "PRI * HTTP/2.0": not for Check
	odd     bool  // something net/http refuses or reads otherwise: stop guarding
}

// head checks the request head at the start of rest once it is complete.
func (c *Conn) head(rest []byte) bool {
	var h headInfo
	pos, first := 0, true
	for {
		i := bytes.IndexByte(rest[pos:], '\n')
		if i < 0 {
			if len(rest) > MaxHead {
				c.st, c.chk = stPass, len(c.buf)
				return true
			}
			return false // incomplete: held back
		}
		line := bytes.TrimSuffix(rest[pos:pos+i], []byte{'\r'})
		next := pos + i + 1
		switch {
		case first && len(line) == 0 && next == 2: // CRLF before a request: dropped, as nginx
			// does (RFC 9112 §2.2 asks a server to ignore at least one);
			// net/http would refuse it.
			c.buf = append(c.buf[:c.chk], c.buf[c.chk+2:]...)
			return true
		case first && len(line) == 0: // a bare LF: net/http refuses it
			c.chk += next
			return true
		case first:
			h.requestLine(line)
			first = false
		case len(line) == 0:
			c.endHead(&h, next)
			return true
		default:
			h.field(line)
		}
		pos = next
	}
}

// requestLine reads the method and version of a request line.
func (h *headInfo) requestLine(line []byte) {
	sp, last := bytes.IndexByte(line, ' '), bytes.LastIndexByte(line, ' ')
	if sp <= 0 || last <= sp {
		h.odd = true
		return
	}
	switch v := line[last+1:]; {
	case string(v) == "HTTP/1.1":
	case string(v) == "HTTP/1.0":
		h.http10 = true
	case len(v) == len("HTTP/1.x") && string(v[:7]) == "HTTP/1." && '2' <= v[7] && v[7] <= '9':
		// net/http reads HTTP/1.2 to HTTP/1.9 as HTTP/1.1 (keep-alive,
		// chunked bodies): guarded as HTTP/1.1, not passed through.
	default: // the HTTP/2 preface "PRI * HTTP/2.0", or one net/http refuses
		h.odd = true
		h.preface = string(line) == "PRI * HTTP/2.0"
	}
	if string(line[:sp]) == "CONNECT" {
		h.switchs = true
	}
}

// field reads one header line.
func (h *headInfo) field(line []byte) {
	if line[0] == ' ' || line[0] == '\t' {
		h.fold = true
		return
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		h.odd = true // net/http refuses it
		return
	}
	name := line[:colon]
	switch {
	case equalFold(name, "content-length"):
		value := bytes.Trim(line[colon+1:], " \t")
		n, err := strconv.ParseUint(string(value), 10, 63)
		if err != nil || h.cl && int64(n) != h.length {
			h.odd = true // net/http refuses it
		}
		h.cl, h.length = true, int64(n)
	case equalFold(name, "transfer-encoding"):
		h.te = true
	case equalFold(name, "upgrade"):
		h.switchs = true
	}
}

// endHead acts on a complete head of n bytes at chk.
func (c *Conn) endHead(h *headInfo, n int) {
	switch {
	case h.fold || h.te && (h.cl || h.http10) ||
		c.Check != nil && !h.preface && !c.Check(c.buf[c.chk:c.chk+n]):
		// Replaced by a head net/http refuses with 400 and a close;
		// nothing after it is read.
		c.buf = append(c.buf[:c.chk], refused...)
		c.chk = len(c.buf)
		c.st = stPass
		if c.fault != nil {
			c.fault()
		}
	case h.odd || h.switchs:
		c.st, c.chk = stPass, len(c.buf)
	case h.te:
		c.chk += n
		c.st = stChunkSize
	case h.cl && h.length > 0:
		c.chk += n
		c.st, c.left = stBody, h.length
	default:
		c.chk += n
	}
}

// equalFold reports whether b is s (lower case) in any case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// parseHex parses a chunk size as net/http does (hex digits, at most 16).
func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(c)
	}
	if n > 1<<62 {
		return 0, false
	}
	return int64(n), true
}
