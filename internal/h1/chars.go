package h1

// Byte classes of RFC 9110 §5.6.2 (tchar) and §5.5 (field-vchar).
const (
	cToken  = 1 << iota // tchar
	cValue              // field-vchar, obs-text, SP or HTAB
	cTarget             // a byte a request-target may hold: VCHAR but "#", or obs-text
	cHost               // reg-name or port byte of an authority (RFC 3986 §3.2.2)
)

var class = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		if c >= 0x21 && c != 0x7f {
			t[c] |= cValue
			if c != '#' {
				t[c] |= cTarget
			}
		}
		if c == ' ' || c == '\t' {
			t[c] |= cValue
		}
	}
	for _, c := range []byte("!#$%&'*+-.^_`|~") {
		t[c] |= cToken
	}
	for _, c := range []byte("-._~!$&'()*+,;=") {
		t[c] |= cHost
	}
	for c := '0'; c <= '9'; c++ {
		t[c] |= cToken | cHost
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] |= cToken | cHost
		t[c-'a'+'A'] |= cToken | cHost
	}
	return t
}()

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if class[c]&cToken == 0 {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// parseDecimal reads 1*DIGIT as a length: at most 2^63-1, as net/http's
// strconv.ParseUint(s, 10, 63) allows.
func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return int64(n), n < 1<<63
}
