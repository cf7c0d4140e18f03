package policy

import "strings"

// hostMatches reports whether host (a request's, as package reqview reads
// it: no port, no trailing dot) is pattern, a route's match.host: equal
// case-insensitively, or for "*.example.com" any name below example.com
// at any depth ("a.example.com", "a.b.example.com"), never example.com
// itself, as nginx server_name reads a leading wildcard.
func hostMatches(host, pattern string) bool {
	if pattern[0] != '*' {
		return strings.EqualFold(host, pattern)
	}
	suffix := pattern[1:] // ".example.com"
	return len(host) > len(suffix) && strings.EqualFold(host[len(host)-len(suffix):], suffix)
}
