package config

import (
	"errors"
	"strings"
)

// ParseSource parses one key source as a policy's `key:` spells it (ip,
// global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM, tls:FIELD); a
// header name is canonicalized, as the policy's is. The error says what
// is wrong with s.
func ParseSource(s string) (Source, error) {
	src, msg := parseSource(s)
	if msg != "" {
		return Source{}, errors.New(msg)
	}
	return src, nil
}

// String spells s as `key:` does: "ip", "global", "header:X-Api-Key".
func (s Source) String() string {
	switch s.Kind {
	case SourceIP:
		return "ip"
	case SourceGlobal:
		return "global"
	}
	var b strings.Builder
	b.WriteString(sourceKindName(s.Kind))
	b.WriteByte(':')
	b.WriteString(s.Name)
	return b.String()
}

// sourceKindName is the prefix of a named source kind.
func sourceKindName(k SourceKind) string {
	switch k {
	case SourceHeader:
		return "header"
	case SourceQuery:
		return "query"
	case SourceCookie:
		return "cookie"
	case SourceJWT:
		return "jwt"
	}
	return "tls"
}
