package h1

import "golang.org/x/net/http/httpguts"

// parse reads the complete head b (ending with an empty line) into r.
func (r *Request) parse(b []byte) Reason {
	*r = Request{Header: r.Header, Peer: r.Peer, TLS: r.TLS, Body: r.Body, host: -1}
	r.reset(b)
	line := lineEnd(b, 0)
	if why := r.requestLine(b[:line]); why != OK {
		return why
	}
	var f fieldScan
	for pos := line + 2; pos < len(b)-2; {
		fl, next, why := parseField(b, pos)
		if why != OK {
			return why
		}
		r.fields = append(r.fields, fl)
		if why := f.note(r, fl); why != OK {
			return why
		}
		pos = next
	}
	return f.finish(r)
}

// lineEnd returns the offset of the CR ending the line at pos; scanHead
// has checked that every line ends with CRLF.
func lineEnd(b []byte, pos int) int {
	return pos + indexByte(b[pos:], '\n') - 1
}

// requestLine parses method SP request-target SP HTTP-version.
func (r *Request) requestLine(l []byte) Reason {
	sp1 := indexByte(l, ' ')
	if sp1 < 0 {
		return BadRequestLine
	}
	sp2 := sp1 + 1 + indexByte(l[sp1+1:], ' ')
	if sp2 == sp1 {
		return BadRequestLine
	}
	m, t, v := l[:sp1], l[sp1+1:sp2], l[sp2+1:]
	switch {
	case !isToken(m):
		return BadMethod
	case len(v) != 8 || string(v[:7]) != "HTTP/1." || v[7] != '0' && v[7] != '1':
		return BadVersion
	case !validTarget(m, t):
		return BadTarget
	}
	r.method = span{0, uint32(sp1)}
	r.target = span{uint32(sp1 + 1), uint32(sp2)}
	r.minor = v[7] - '0'
	return OK
}

// parseField parses the field line at pos: field-name ":" OWS
// field-value OWS CRLF (RFC 9112 §5). It returns the field and the
// offset of the next line; the line must end with CRLF (scanHead checked
// that every LF follows a CR), so the value ends at the first byte that
// is not a field-vchar: a CR followed by LF, or the line is refused.
func parseField(b []byte, pos int) (field, int, Reason) {
	i := pos
	for class[b[i]]&cToken != 0 {
		i++
	}
	switch {
	case i == pos && (b[i] == ' ' || b[i] == '\t'):
		return field{}, 0, ObsFold
	case i == pos || b[i] != ':':
		return field{}, 0, BadFieldName
	}
	f := field{name: span{uint32(pos), uint32(i)}}
	i++
	for b[i] == ' ' || b[i] == '\t' {
		i++
	}
	v := i
	for class[b[i]]&cValue != 0 {
		i++
	}
	if b[i] != '\r' || b[i+1] != '\n' {
		return field{}, 0, BadFieldValue
	}
	next := i + 2
	for i > v && (b[i-1] == ' ' || b[i-1] == '\t') {
		i--
	}
	f.value = span{uint32(v), uint32(i)}
	return f, next, OK
}

// fieldScan collects what the framing fields say while they are parsed.
type fieldScan struct {
	lengths, te, hosts int
	length             span // the first Content-Length's value (responses)
	keepAlive, connUp  bool
	upgradeField       bool
}

// note records the framing meaning of the field just appended to r.
func (s *fieldScan) note(r *Request, f field) Reason {
	name, v := r.buf[f.name.off:f.name.end], r.buf[f.value.off:f.value.end]
	switch {
	case equalFold(name, "content-length"):
		s.lengths++
		n, ok := parseDecimal(v)
		if !ok {
			return BadContentLength
		}
		if s.lengths > 1 {
			return DupContentLength
		}
		r.Length = n
	case equalFold(name, "transfer-encoding"):
		s.te++
		if r.minor == 0 {
			return ChunkedOnHTTP10
		}
		if s.te > 1 || !equalFold(v, "chunked") {
			return BadTransferEncoding
		}
	case equalFold(name, "host"):
		s.hosts++
		if s.hosts > 1 || !httpguts.ValidHostHeader(r.str(f.value)) {
			return BadHost
		}
		r.host = int32(len(r.fields) - 1)
	case equalFold(name, "connection"):
		r.closeConn = r.closeConn || hasToken(v, "close")
		s.keepAlive = s.keepAlive || hasToken(v, "keep-alive")
		s.connUp = s.connUp || hasToken(v, "upgrade")
	case equalFold(name, "upgrade"):
		// "h2c" is dropped (RFC 9113 §3.1 removed the upgrade): only
		// another protocol makes the request an upgrade.
		eachToken(v, func(t []byte) bool {
			s.upgradeField = s.upgradeField || !equalFold(t, "h2c")
			return true
		})
	case equalFold(name, "expect"):
		// RFC 9110 §10.1.1: ignored in an HTTP/1.0 request.
		r.expect100 = r.minor == 1 && equalFold(v, "100-continue")
	}
	return OK
}

// finish applies the message-level framing rules once every field is
// read (RFC 9112 §6.1, §6.3, §9.3).
func (s *fieldScan) finish(r *Request) Reason {
	switch {
	case s.te > 0 && s.lengths > 0:
		return LengthAndChunked
	case s.hosts == 0 && r.minor == 1 && r.Method() != "CONNECT":
		return BadHost
	case s.te > 0:
		r.Framing = Chunked
	case s.lengths > 0:
		r.Framing = Length
	}
	if r.minor == 0 && !s.keepAlive {
		r.closeConn = true
	}
	r.upgrade = s.connUp && s.upgradeField
	return OK
}
