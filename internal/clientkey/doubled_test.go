package clientkey

import (
	"testing"

	"rlproxy/internal/config"
)

// TestDoubled: a credential a source reads, sent twice in any spelling an
// upstream may read as the same, is doubled; other repeats are not.
func TestDoubled(t *testing.T) {
	// Not parallel: AllocsPerRun.
	e := newExtractor(t, config.KeySpec{}, false, "header:X-Api-Key", "query:key", "cookie:sid")
	for _, tc := range []struct {
		name    string
		target  string
		headers []string
		want    bool
	}{
		{"none", "/", nil, false},
		{"once each", "/?key=a&x=1&x=2", []string{"X-Api-Key: a", "Cookie: sid=1; a=2", "Cookie: b=3"}, false},
		{"other header repeated", "/", []string{"X-Api-Key: a", "X-Other: 1", "X-Other: 2"}, false},
		{"header twice", "/", []string{"X-Api-Key: decoy", "X-Api-Key: real"}, true},
		{"header underscore", "/", []string{"X-Api-Key: decoy", "X_Api_Key: real"}, true},
		{"header underscore alone", "/", []string{"X_API_KEY: real"}, false},
		{"query twice", "/?key=decoy&key=real", nil, true},
		{"query escaped name", "/?key=decoy&%6Bey=real", nil, true},
		{"query semicolon", "/?key=decoy;key=real", nil, true},
		{"query value names", "/?k=key&key=1", nil, false},
		{"cookie twice in a line", "/", []string{"Cookie: sid=decoy; sid=real"}, true},
		{"cookie twice over lines", "/", []string{"Cookie: sid=decoy", "Cookie: a=1; sid=real"}, true},
		{"cookie prefix name", "/", []string{"Cookie: sid=1; sidx=2; xsid=3"}, false},
		{"cookie escaped name", "/", []string{"Cookie: s%69d=real; sid=decoy"}, true},
	} {
		if got := e.Doubled(request(tc.target, tc.headers...)); got != tc.want {
			t.Errorf("%s: Doubled = %v, want %v", tc.name, got, tc.want)
		}
	}
	if raceEnabled {
		return // allocation counts: the race detector makes sync.Pool drop items
	}
	r := request("/?a=1&key=v&b=2", "X-Api-Key: a", "Cookie: sid=1; a=2", "Accept: */*", "User-Agent: x")
	if n := testing.AllocsPerRun(100, func() { e.Doubled(r) }); n != 0 {
		t.Errorf("Doubled allocates %v times, want 0", n)
	}
}

// TestDoubledPHPNames: PHP reads ".", " " (or "+") and "[" in a query or
// cookie name as "_", and drops leading spaces: a second spelling of a
// credential named with "_" is doubled; names differing otherwise are not.
func TestDoubledPHPNames(t *testing.T) {
	e := newExtractor(t, config.KeySpec{}, false, "query:api_key", "cookie:session_id")
	for _, tc := range []struct {
		target string
		cookie string
		want   bool
	}{
		{"/?api_key=decoy&api.key=real", "", true},
		{"/?api_key=decoy&api+key=real", "", true},
		{"/?api_key=decoy&api%20key=real", "", true},
		{"/?api_key=decoy&api[key=real", "", true},
		{"/?api_key=decoy&+api_key=real", "", true},
		{"/?api_key=a&api-key=b&apikey=c&api_keys=d", "", false},
		{"/", "Cookie: session.id=real; session_id=decoy", true},
		{"/", "Cookie: session%2Eid=real; session_id=decoy", true},
		{"/", "Cookie: session_id=a; session-id=b; sessionid=c", false},
	} {
		var headers []string
		if tc.cookie != "" {
			headers = []string{tc.cookie}
		}
		if got := e.Doubled(request(tc.target, headers...)); got != tc.want {
			t.Errorf("%s %s: Doubled = %v, want %v", tc.target, tc.cookie, got, tc.want)
		}
	}
}
