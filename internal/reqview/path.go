package reqview

import "strings"

// pathState is a state of Path's parser, named as nginx's
// ngx_http_parse_complex_uri names them.
type pathState uint8

const (
	psUsual   pathState = iota // inside a segment
	psSlash                    // right after a "/"
	psDot                      // after "/."
	psDotDot                   // after "/.."
	psQuoted                   // after "%"
	psQuoted2                  // after "%X"
)

// Path returns the path routes match for raw, the escaped path of a request
// target (the bytes before any "?", starting with "/"), normalized as
// nginx 1.22's ngx_http_parse_complex_uri normalizes a URI before location
// matching, with merge_slashes on: every %XX decoded, a decoded "/" or "."
// then acting as a separator or a dot segment, except that a decoded "%",
// "#" or "?" is a plain byte; "." and ".." segments resolved; runs of
// slashes merged; a trailing "/" (or "/." and "/..", which leave one) kept.
// ok is false where nginx answers 400: a bad escape ("%", "%x", "%zz"), an
// escaped NUL ("%00"), and a ".." that climbs above the root
// ("/../login"). A path needing none of this (no "%", "//" or "/.") is
// returned as it is, without allocating.
func Path(raw string) (p string, ok bool) {
	if !strings.Contains(raw, "/.") && !strings.Contains(raw, "//") && strings.IndexByte(raw, '%') < 0 {
		return raw, true
	}
	return normalize(raw)
}

// normalize is Path without the test for a clean path.
func normalize(raw string) (p string, ok bool) {
	u := make([]byte, 0, len(raw))
	st, quoted := psUsual, psUsual
	var decoded byte
	for i := 0; i < len(raw); i++ {
		ch := raw[i]
		switch st {
		case psQuoted, psQuoted2:
			h, isHex := unhex(ch)
			if !isHex {
				return "", false
			}
			if st == psQuoted {
				decoded, st = h, psQuoted2
				continue
			}
			ch = decoded<<4 | h
			switch ch {
			case 0:
				return "", false
			case '%', '#', '?': // taken as data, not as syntax
				u, st = append(u, ch), psUsual
				continue
			}
			st = quoted
		case psUsual, psSlash, psDot, psDotDot:
			if ch == '%' {
				st, quoted = psQuoted, st
				continue
			}
		}
		if u, st, ok = step(u, st, ch); !ok {
			return "", false
		}
	}
	switch st {
	case psQuoted, psQuoted2:
		return "", false
	case psDot:
		u = u[:len(u)-1]
	case psDotDot:
		if u, ok = up(u); !ok {
			return "", false
		}
	}
	return string(u), true
}

// step feeds one byte of the path (as sent, or decoded) to the parser in
// state st, appending to u what nginx's parser writes.
func step(u []byte, st pathState, ch byte) ([]byte, pathState, bool) {
	switch st {
	case psSlash:
		switch ch {
		case '/': // merge_slashes
			return u, psSlash, true
		case '.':
			return append(u, ch), psDot, true
		}
	case psDot:
		switch ch {
		case '/': // "/./": drop the "."
			return u[:len(u)-1], psSlash, true
		case '.':
			return append(u, ch), psDotDot, true
		}
	case psDotDot:
		if ch == '/' { // "/../": back to the segment before
			u, ok := up(u)
			return u, psSlash, ok
		}
	}
	if ch == '/' {
		return append(u, ch), psSlash, true
	}
	return append(u, ch), psUsual, true
}

// up removes the trailing "/.." of u and the segment before it, keeping
// that segment's leading "/"; false when there is none (above the root).
func up(u []byte) ([]byte, bool) {
	for j := len(u) - 4; j >= 0; j-- {
		if u[j] == '/' {
			return u[:j+1], true
		}
	}
	return u, false
}

// unhex is the value of one hex digit.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c|0x20 && c|0x20 <= 'f':
		return (c | 0x20) - 'a' + 10, true
	}
	return 0, false
}
