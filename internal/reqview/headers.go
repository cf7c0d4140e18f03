package reqview

import (
	"net/http"
	"net/textproto"
)

// Headers is a read-only view of a request's header fields, as an HTTP
// engine holds them: net/http's map (StdHeaders) or an engine's parsed
// head, read in place. Names are compared ASCII case-insensitively (RFC
// 9110 §5.1); values are as received, without the surrounding whitespace
// the field syntax allows (RFC 9110 §5.5). The strings are valid while the
// request is being served.
type Headers interface {
	// Get returns the first value of the field called name and whether
	// there is one.
	Get(name string) (string, bool)
	// Values calls fn with each value of the field called name, in the
	// order received, until fn returns false.
	Values(name string, fn func(string) bool)
	// Each calls fn with every field as sent, in order, until fn returns
	// false.
	Each(fn func(name, value string) bool)
}

// StdHeaders is net/http's header map as Headers, with no copy: converting
// an http.Header to it costs nothing. A lookup by a name already in
// canonical form (textproto.CanonicalMIMEHeaderKey), as every name rlproxy
// reads is, is one map index; another spelling is canonicalised first
// (allocating). net/http keeps no field order across names: Each visits
// the names in map order, each name's values in the order received, under
// their canonical names.
type StdHeaders http.Header

// Get implements Headers.
func (h StdHeaders) Get(name string) (string, bool) {
	if vs := h.lines(name); len(vs) > 0 {
		return vs[0], true
	}
	return "", false
}

// Values implements Headers.
func (h StdHeaders) Values(name string, fn func(string) bool) {
	for _, v := range h.lines(name) {
		if !fn(v) {
			return
		}
	}
}

// Each implements Headers.
func (h StdHeaders) Each(fn func(name, value string) bool) {
	for k, vs := range h {
		for _, v := range vs {
			if !fn(k, v) {
				return
			}
		}
	}
}

// lines returns the values of name: one map index when name is present or
// canonical, a canonicalisation otherwise.
func (h StdHeaders) lines(name string) []string {
	if vs, ok := h[name]; ok || canonical(name) {
		return vs
	}
	return h[textproto.CanonicalMIMEHeaderKey(name)]
}

// canonical reports whether name is in textproto.CanonicalMIMEHeaderKey's
// form: upper case at the start and after each "-", lower case elsewhere.
func canonical(name string) bool {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

// Field is one header field: its name as the engine holds it, and its value.
type Field struct{ Name, Value string }

// Collector gathers a field's values, or every field, through Headers'
// callbacks without allocating once warm: its callbacks are bound once, in
// NewCollector (a closure passed to an interface method otherwise escapes,
// one allocation per call), and its slices are reused. It is not safe for
// concurrent use: keep one per goroutine, or in a sync.Pool.
type Collector struct {
	values   []string
	fields   []Field
	addValue func(string) bool
	addField func(name, value string) bool
}

// NewCollector returns an empty Collector.
func NewCollector() *Collector {
	c := &Collector{}
	c.addValue = func(v string) bool { c.values = append(c.values, v); return true }
	c.addField = func(n, v string) bool { c.fields = append(c.fields, Field{n, v}); return true }
	return c
}

// Values returns every value of the field called name in h, in order. The
// slice is c's, valid until c's next call.
func (c *Collector) Values(h Headers, name string) []string {
	c.values = c.values[:0]
	h.Values(name, c.addValue)
	return c.values
}

// Fields returns every field of h, in h's order (Each). The slice is c's,
// valid until c's next call.
func (c *Collector) Fields(h Headers) []Field {
	c.fields = c.fields[:0]
	h.Each(c.addField)
	return c.fields
}

// Release forgets the strings c holds (so a pooled Collector keeps no
// request's headers alive) and drops slices grown past maxKept entries
// by an unusual request.
func (c *Collector) Release() {
	const maxKept = 64
	if cap(c.values) > maxKept {
		c.values = nil
	}
	if cap(c.fields) > maxKept {
		c.fields = nil
	}
	clear(c.values[:cap(c.values)])
	clear(c.fields[:cap(c.fields)])
}
