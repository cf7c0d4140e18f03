package config_test

import (
	"errors"
	"fmt"

	"rlproxy/internal/config"
)

// ParseWith reports every mistake at once, each as FILE:LINE: field: message,
// as `rlproxy validate` prints them.
func ExampleParseWith() {
	src := `upstreams:
  app: { url: "http://127.0.0.1:9000" }
policies:
  api:
    algorithm: token_bucket
    rate: 10/s
    burts: 20
routes:
  - name: api
    upstream: ap
    policies: [api]
`
	_, err := config.ParseWith("rlproxy.yaml", []byte(src), config.LoadOptions{})
	fmt.Println(err)
	var errs *config.Errors
	if errors.As(err, &errs) {
		fmt.Println(len(errs.Problems), "problems; first at line", errs.Problems[0].Line)
	}
	// Output:
	// rlproxy.yaml:4: policies.api.burst: required for token_bucket: the bucket's capacity in requests, at least 1
	// rlproxy.yaml:6: policies.api.rate: "10/s": want N r/s, N r/m, N r/h or N r/d
	// rlproxy.yaml:7: policies.api.burts: unknown field "burts"; did you mean "burst"?
	// rlproxy.yaml:10: routes[0].upstream: unknown upstream "ap"; did you mean "app"?
	// 4 problems; first at line 4
}

// A valid file compiles rates exactly: 30r/m is 30 requests per 60000 ms.
func ExampleParseWith_rate() {
	src := `upstreams: { demo: { builtin: echo } }
policies:
  login: { algorithm: leaky_bucket, rate: 30r/m, burst: 5, nodelay: true }
routes: [{ name: login, upstream: demo, policies: [login] }]
`
	c, err := config.ParseWith("rlproxy.yaml", []byte(src), config.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	l := c.Policies["login"].Limit
	fmt.Println(l.Count, l.Period, &l)
	// Output: 30 60000 leaky bucket 30 r/m (burst 5, nodelay)
}
