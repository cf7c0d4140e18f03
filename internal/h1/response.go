package h1

// Response is a parsed upstream response head. Its strings point into
// the upstream connection's buffer and are valid until the response
// ends. A Response is reused for the next response on its connection.
type Response struct {
	Header
	Status int // status code, 100 to 999
	reason span
	minor  uint8

	// Framing is the body's framing (RFC 9112 §6.3), Length its
	// Content-Length in bytes (Length framing).
	Framing Framing
	Length  int64
	// Close reports that the upstream closes after this response
	// ("Connection: close", HTTP/1.0 without keep-alive, or a body
	// delimited by the close).
	Close bool
}

// Reason returns the reason phrase as sent.
func (p *Response) Reason() string { return p.str(p.reason) }

// ParseResponse parses the response head at the start of b, answering
// a request with method (HEAD and CONNECT change the framing). It
// returns the head's length, or 0 and OK when b holds no complete head,
// or a Reason (the upstream's answer is then a 502). The head is capped
// by lim.MaxHead (the 1 MiB response-head cap by default).
func ParseResponse(b []byte, p *Response, method string, lim Limits) (int, Reason) {
	n, _, why := scanHead(b, 0, lim)
	if n == 0 || why != OK {
		return 0, why
	}
	return n, p.parse(b[:n], method)
}

// parse reads the complete response head b.
func (p *Response) parse(b []byte, method string) Reason {
	*p = Response{Header: p.Header}
	p.reset(b)
	line := lineEnd(b, 0)
	if !p.statusLine(b[:line]) {
		return BadStatus
	}
	var s fieldScan
	for pos := line + 2; pos < len(b)-2; {
		fl, next, why := parseField(b, pos)
		if why != OK {
			return why
		}
		p.fields = append(p.fields, fl)
		if why := s.noteResponse(p, fl); why != OK {
			return why
		}
		pos = next
	}
	return s.finishResponse(p, method)
}

// statusLine parses HTTP-version SP 3DIGIT SP [reason-phrase].
func (p *Response) statusLine(l []byte) bool {
	if len(l) < 12 || string(l[:7]) != "HTTP/1." || l[7] != '0' && l[7] != '1' ||
		l[8] != ' ' || !isDigit(l[9]) || !isDigit(l[10]) || !isDigit(l[11]) || l[9] == '0' {
		return false
	}
	if len(l) > 12 && l[12] != ' ' {
		return false
	}
	for _, c := range l[min(13, len(l)):] {
		if class[c]&cValue == 0 {
			return false
		}
	}
	p.minor = l[7] - '0'
	p.Status = int(l[9]-'0')*100 + int(l[10]-'0')*10 + int(l[11]-'0')
	p.reason = span{uint32(min(13, len(l))), uint32(len(l))}
	return true
}

// noteResponse records the framing meaning of a response field.
func (s *fieldScan) noteResponse(p *Response, f field) Reason {
	name, v := p.buf[f.name.off:f.name.end], p.buf[f.value.off:f.value.end]
	switch {
	case equalFold(name, "content-length"):
		// A repeat is accepted only byte for byte the first value, as
		// net/http does: RFC 9110 §8.6 allows a recipient to merge
		// identical values, and "05" after "5" is not one.
		s.lengths++
		if s.lengths > 1 {
			if string(v) != string(p.buf[s.length.off:s.length.end]) {
				return DupContentLength
			}
			break
		}
		n, ok := parseDecimal(v)
		if !ok {
			return BadContentLength
		}
		p.Length, s.length = n, f.value
	case equalFold(name, "transfer-encoding"):
		// As on requests: one field, "chunked", on HTTP/1.1 only. RFC
		// 9112 §6.3 would read other codings to the close; a proxy
		// that only forwards them has no use for them, and net/http
		// refuses them too.
		s.te++
		switch {
		case p.minor == 0:
			return ChunkedOnHTTP10
		case s.te > 1 || !equalFold(v, "chunked"):
			return BadTransferEncoding
		}
	case equalFold(name, "connection"):
		p.Close = p.Close || hasToken(v, "close")
		s.keepAlive = s.keepAlive || hasToken(v, "keep-alive")
	}
	return OK
}

// finishResponse applies RFC 9112 §6.3 to a response to method.
func (s *fieldScan) finishResponse(p *Response, method string) Reason {
	if p.minor == 0 && !s.keepAlive {
		p.Close = true
	}
	switch {
	case s.te > 0 && s.lengths > 0:
		return LengthAndChunked
	case p.Status < 200 || p.Status == 204 || p.Status == 304 || method == "HEAD":
		p.Framing = NoBody
	case method == "CONNECT" && p.Status < 300:
		p.Framing = ToClose
	case s.te > 0:
		p.Framing = Chunked
	case s.lengths > 0:
		p.Framing = Length
	default:
		p.Framing, p.Close = ToClose, true
	}
	return OK
}
