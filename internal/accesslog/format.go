package accesslog

import (
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"rlproxy/internal/config"
)

// redacted replaces a credential's value.
const redacted = "REDACTED"

// appendJSON appends e as one JSON object and a newline.
func appendJSON(b []byte, e *Entry) []byte {
	var tmp [256]byte // the path and the decision before escaping
	b = append(b, `{"time":"`...)
	b = appendUTCMillis(b, e.Time)
	b = append(b, `","client":"`...)
	b = e.Client.AppendTo(b)
	b = appendPeer(append(b, `","peer":`...), e.Peer)
	b = str(append(b, `,"method":`...), e.Method)
	b = str(append(b, `,"host":`...), e.Host)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, appendTarget(tmp[:0], e))
	b = str(append(b, `,"protocol":`...), e.Proto)
	b = strconv.AppendInt(append(b, `,"status":`...), int64(e.Status), 10)
	b = strconv.AppendInt(append(b, `,"bytes":`...), e.Bytes, 10)
	b = appendMS(append(b, `,"duration_ms":`...), e.Duration)
	b = str(append(b, `,"route":`...), e.Route)
	b = append(b, `,"decision":`...)
	b = appendJSONString(b, appendDecision(tmp[:0], e))
	b = str(append(b, `,"upstream":`...), e.Upstream)
	b = strconv.AppendInt(append(b, `,"upstream_status":`...), int64(e.UpstreamStatus), 10)
	b = appendMS(append(b, `,"upstream_ms":`...), e.UpstreamTime)
	b = strconv.AppendInt(append(b, `,"retries":`...), int64(e.Retries), 10)
	b = str(append(b, `,"request_id":`...), e.RequestID)
	b = str(append(b, `,"user_agent":`...), e.UserAgent)
	b = append(b, `,"referer":`...)
	b = appendJSONString(b, withoutQuery(e.Referer))
	return append(b, "}\n"...)
}

// appendCombined appends e in nginx's combined format, then rlproxy's
// fields as key=value pairs (nginx's own log_format variables where one
// exists: rt = $request_time, us = $upstream_status, ut =
// $upstream_header_time).
func appendCombined(b []byte, e *Entry) []byte {
	var tmp [128]byte
	b = e.Client.AppendTo(b)
	b = append(b, " - - ["...)
	b = e.Time.AppendFormat(b, "02/Jan/2006:15:04:05 -0700")
	b = append(b, `] "`...)
	b = append(b, e.Method...)
	b = append(b, ' ')
	b = appendTarget(b, e)
	b = append(b, ' ')
	b = append(b, e.Proto...)
	b = append(b, `" `...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = strconv.AppendInt(append(b, ' '), e.Bytes, 10)
	b = strconv.AppendQuote(append(b, ' '), withoutQuery(e.Referer))
	b = strconv.AppendQuote(append(b, ' '), e.UserAgent)
	b = appendSeconds(append(b, " rt="...), e.Duration)
	b = strconv.AppendQuote(append(b, " route="...), e.Route)
	b = strconv.AppendQuote(append(b, " decision="...), string(appendDecision(tmp[:0], e)))
	b = strconv.AppendQuote(append(b, " upstream="...), e.Upstream)
	b = strconv.AppendInt(append(b, " us="...), int64(e.UpstreamStatus), 10)
	b = appendSeconds(append(b, " ut="...), e.UpstreamTime)
	b = strconv.AppendInt(append(b, " retries="...), int64(e.Retries), 10)
	b = strconv.AppendQuote(append(b, " id="...), e.RequestID)
	b = appendPeer(append(b, " peer="...), e.Peer)
	return append(b, '\n')
}

func str(b []byte, s string) []byte { return appendJSONString(b, s) }

// appendPeer appends the peer quoted ("192.0.2.1:5000", "[2001:db8::1]:443"),
// or "" when unknown: in both formats, as its bytes need no escaping.
func appendPeer(b []byte, p netip.AddrPort) []byte {
	b = append(b, '"')
	if p.IsValid() {
		b = p.AppendTo(b)
	}
	return append(b, '"')
}

// appendDecision is the verdict in words: "delayed 120 ms", "rejected by
// api", or the bare decision.
func appendDecision(b []byte, e *Entry) []byte {
	b = append(b, e.Decision...)
	switch e.Decision {
	case "delayed":
		b = strconv.AppendInt(append(b, ' '), e.WaitMS, 10)
		b = append(b, " ms"...)
	case "rejected":
		if e.Policy != "" {
			b = append(append(b, " by "...), e.Policy...)
		}
	}
	return b
}

// appendTarget appends the path and the query with the values of
// redacted parameters replaced.
func appendTarget(b []byte, e *Entry) []byte {
	b = append(b, e.Path...)
	if e.Query == "" {
		return b
	}
	b = append(b, '?')
	for i, q := 0, e.Query; q != ""; i++ {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if i > 0 {
			b = append(b, '&')
		}
		name, _, hasValue := strings.Cut(pair, "=")
		if n, err := url.QueryUnescape(name); err == nil && hasValue && slices.Contains(e.Redact, n) {
			b = append(append(append(b, name...), '='), redacted...)
			continue
		}
		b = append(b, pair...)
	}
	return b
}

// withoutQuery cuts a URL's query and fragment (a Referer may carry a key).
func withoutQuery(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		return s[:i]
	}
	return s
}

// appendMS appends d in milliseconds with microsecond precision.
func appendMS(b []byte, d time.Duration) []byte { return appendThousandths(b, d.Microseconds()) }

// appendSeconds appends d in seconds with millisecond precision (nginx's
// $request_time).
func appendSeconds(b []byte, d time.Duration) []byte {
	return appendThousandths(b, d.Milliseconds())
}

// appendThousandths appends n/1000 with three decimals ("-0.001", "12.345"),
// in integers: strconv.AppendFloat cost ~400 instructions a field.
func appendThousandths(b []byte, n int64) []byte {
	u := uint64(n)
	if n < 0 {
		b, u = append(b, '-'), uint64(-n)
	}
	b = strconv.AppendUint(b, u/1000, 10)
	f := u % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

// appendUTCMillis appends t in UTC as RFC 3339 with milliseconds
// ("2006-01-02T15:04:05.000Z", the fraction truncated as time.Format
// does), without parsing a layout on every line.
func appendUTCMillis(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	}
	hour, minute, sec := t.Clock()
	b = append2(append2(b, year/100), year%100)
	b = append2(append(b, '-'), int(month))
	b = append2(append(b, '-'), day)
	b = append2(append(b, 'T'), hour)
	b = append2(append(b, ':'), minute)
	b = append2(append(b, ':'), sec)
	ms := t.Nanosecond() / 1e6
	return append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// append2 appends 0 ≤ n < 100 as two digits.
func append2(b []byte, n int) []byte { return append(b, byte('0'+n/10), byte('0'+n%10)) }

// jsonPlain marks the bytes a JSON string holds as they are: printable
// ASCII but '"' and '\\'. A table, not comparisons: it is read for every
// byte of every logged field. Never written after initialisation.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendJSONString appends s as a JSON string: '"', '\\' and control
// characters escaped, invalid UTF-8 as U+FFFD. (A log line is not HTML:
// '<', '>' and '&' stay as they are.)
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		// The run that needs no escaping, at once (most lines are all of it).
		j := i
		for j < len(s) && jsonPlain[s[j]] {
			j++
		}
		b = append(b, s[i:j]...)
		if i = j; i == len(s) {
			break
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

// QueryKeys are the query parameter names cfg's key sources read
// (policies, plans and client_hash keys): their values are credentials.
func QueryKeys(cfg *config.Config) []string {
	var names []string
	add := func(k config.KeySpec) {
		for _, s := range k.Sources {
			if s.Kind == config.SourceQuery && !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	for _, name := range cfg.PolicyOrder {
		add(cfg.Policies[name].Key)
	}
	for _, p := range cfg.Plans {
		add(p.Key)
	}
	for _, u := range cfg.Upstreams {
		add(u.HashKey)
	}
	slices.Sort(names)
	return names
}
