package proxy

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
	"rlproxy/internal/policy"
)

// TestAppendJSONStringMatchesEncodingJSON holds the append-based encoder
// to encoding/json's bytes (HTML-safe escapes, short forms, U+2028/2029,
// invalid UTF-8), so problem bodies did not change when json.Marshal left
// the refusal path.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quo"te`, `back\slash`, "/a b/<script>&x=1>", "\b\f\n\r\t\x00\x01\x1f\x7f",
		"é ü 日本 🙂", "\u2028line\u2029para", "bad\xffutf8\xc3", "\xe2\x80", "policy \"api\" allows 5 requests per 60 s",
	} {
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("string %q: got %s, want %s", s, got[1:], want)
		}
		if got := appendJSONString(nil, []byte(s)); string(got) != string(want) {
			t.Errorf("bytes %q: got %s, want %s", s, got, want)
		}
	}
}

// TestWriteProblemBody checks the refusal body member by member, in order,
// against what json.Marshal of the RFC 9457 struct produced before.
func TestWriteProblemBody(t *testing.T) {
	pol := &policy.Policy{Policy: config.Policy{Name: `a"pi`}, Quota: 5, Window: 60}
	res := &policy.Result{
		RetryAfter: 1500,
		Binding:    0,
		Items:      []policy.Item{{Policy: pol, Decision: algo.Decision{Remaining: -1, ResetAfter: 2001}, Status: policy.Rejected}},
	}
	rt := &Runtime{Config: &config.Config{Response: config.Response{Status: 429}}}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/p/<x>%20y", nil)
	writeProblem(w, r, problemRateLimited, rt, res)
	want := `{"type":"urn:rlproxy:problem:rate-limited","title":"Too Many Requests","status":429,` +
		`"detail":"policy \"a\\\"pi\" allows 5 requests per 60 s; retry in 2 s","instance":"/p/\u003cx\u003e y",` +
		`"policy":"a\"pi","retryAfter":2,"limit":5,"remaining":0,"reset":3,"window":60,"violated-policies":["a\"pi"]}` + "\n"
	if got := w.Body.String(); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	// response.problem_types: ietf changes the type only.
	rt.Config.Response.ProblemTypes = config.ProblemTypesIETF
	wi := httptest.NewRecorder()
	writeProblem(wi, r, problemRateLimited, rt, res)
	rt.Config.Response.ProblemTypes = config.ProblemTypesRLProxy
	if got, want := wi.Body.String(), `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded"`+want[len(`{"type":"urn:rlproxy:problem:rate-limited"`):]; got != want {
		t.Errorf("ietf body\n got %s\nwant %s", got, want)
	}
	if w.Code != 429 || w.Header().Get("Retry-After") != "2" || w.Header().Get("Cache-Control") != "no-store" ||
		w.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("status %d, headers %v", w.Code, w.Header())
	}
	if cl := w.Header().Get("Content-Length"); cl != itoa(len(want)) {
		t.Errorf("Content-Length %s, body %d bytes", cl, len(want))
	}

	w = httptest.NewRecorder()
	writeProblem(w, httptest.NewRequest("GET", "/nowhere", nil), problemNoRoute, nil, nil)
	want = `{"type":"urn:rlproxy:problem:no-route","title":"Not Found","status":404,"detail":"no route matches this request","instance":"/nowhere"}` + "\n"
	if got := w.Body.String(); got != want || w.Code != 404 || w.Header().Get("Retry-After") != "" {
		t.Errorf("no route: %d %q headers %v", w.Code, got, w.Header())
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
