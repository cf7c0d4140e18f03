package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// attackKey is the attacker's API key; well-behaved clients use good-NN.
const attackKey = "attacker"

// goodKeyPrefix starts every well-behaved client's API key.
const goodKeyPrefix = "good-"

// maxAttackInFlight bounds the attacker's concurrent requests; a tick that
// finds them all busy is counted as dropped, not queued.
const maxAttackInFlight = 128

// attackPlan is the attack scenario: clients well-behaved clients at
// clientRate r/s each (their limit is 10 r/s burst 20), plus, in the attack
// phase, one attacker at attackRate r/s, each phase lasting dur.
type attackPlan struct {
	dur        time.Duration
	clients    int
	clientRate float64 // requests per second per well-behaved client
	attackRate float64 // requests per second
	header     string  // the key header, X-API-Key
}

// attackTargets lists the attack scenario's rows; nginx is the reference.
func attackTargets() []targetSpec {
	return []targetSpec{
		{id: "nginx_limit_req", name: "nginx limit_req (reference)", kind: "nginx", conf: "nginx-attack.conf"},
		{id: "rlproxy_memory", name: "rlproxy, memory store", kind: "rlproxy", conf: "rlproxy-attack-memory.yaml"},
		{id: "rlproxy_valkey", name: "rlproxy, Valkey store", kind: "rlproxy", conf: "rlproxy-attack-valkey.yaml", valkey: true},
	}
}

// goodStats summarises the well-behaved clients of one phase (latency in µs).
type goodStats struct {
	Sent    int64   `json:"sent"`
	OK      int64   `json:"ok"`      // 200
	Refused int64   `json:"refused"` // any other status: must stay 0
	Errors  int64   `json:"errors"`  // transport errors
	P50us   float64 `json:"p50_us"`
	P95us   float64 `json:"p95_us"`
	P99us   float64 `json:"p99_us"`
	// ReachedUpstream counts good-* requests the upstream served.
	ReachedUpstream int64 `json:"reached_upstream"`
}

// attackerStats summarises the attacker of one phase.
type attackerStats struct {
	Sent    int64   `json:"sent"`
	RateRPS float64 `json:"rate_rps"` // achieved send rate
	OK      int64   `json:"ok"`
	Refused int64   `json:"refused_429"`
	Other   int64   `json:"other_status"`
	Errors  int64   `json:"errors"`
	Dropped int64   `json:"dropped_ticks"` // ticks skipped: maxAttackInFlight busy
	// ReachedUpstream counts attacker requests the upstream served;
	// RefusedShare = (Sent − ReachedUpstream) / Sent.
	ReachedUpstream int64   `json:"reached_upstream"`
	RefusedShare    float64 `json:"refused_without_reaching_upstream"`
}

// phaseResult is one phase (baseline: well-behaved only; attack: with attacker).
type phaseResult struct {
	Good     goodStats      `json:"good"`
	Attacker *attackerStats `json:"attacker,omitempty"`
	// Valkey is the growth of INFO commandstats (Valkey targets only).
	Valkey *callDelta `json:"valkey_calls,omitempty"`
	// BackgroundCPUPct is CPU used meanwhile by processes outside the
	// scenario (this load generator and its children: proxy, Valkey,
	// upstream), in % of all CPUs.
	BackgroundCPUPct float64 `json:"background_cpu_pct"`
}

// attackResult is one row of the attack report.
type attackResult struct {
	ID       string       `json:"id"`
	Name     string       `json:"name"`
	Status   string       `json:"status"`
	Baseline *phaseResult `json:"baseline,omitempty"`
	Attack   *phaseResult `json:"attack,omitempty"`
	// ScriptCallsPerGood is baseline script calls per well-behaved request.
	ScriptCallsPerGood *float64 `json:"script_calls_per_good_request,omitempty"`
	// EvalSHAPerRefused is the attack phase's EVALSHA calls (all clients)
	// divided by the attacker's refusals; ExcessPerRefused first takes off
	// what the served requests cost at the baseline rate.
	EvalSHAPerRefused *float64 `json:"evalsha_per_refused,omitempty"`
	ExcessPerRefused  *float64 `json:"excess_script_calls_per_refused,omitempty"`
}

// attackReport is attack.json.
type attackReport struct {
	Meta    meta            `json:"meta"`
	Targets []*attackResult `json:"targets"`
}

// upstreamCounts reads bench/upstream's per-header counts.
func upstreamCounts(ctx context.Context, addr string) (map[string]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/__counts", nil)
	if err != nil {
		return nil, fmt.Errorf("reading upstream counts: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading upstream counts: %w", err)
	}
	defer resp.Body.Close()
	var c struct {
		ByHeader map[string]int64 `json:"by_header"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return nil, fmt.Errorf("decoding upstream counts: %w", err)
	}
	return c.ByHeader, nil
}

// reached splits the growth of the upstream's counts into well-behaved and
// attacker requests.
func reached(before, after map[string]int64) (good, attacker int64) {
	for k, n := range after {
		d := n - before[k]
		switch {
		case k == attackKey:
			attacker += d
		case strings.HasPrefix(k, goodKeyPrefix):
			good += d
		}
	}
	return good, attacker
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := max(int(math.Ceil(p/100*float64(len(sorted))))-1, 0)
	return float64(sorted[i].Nanoseconds()) / 1e3
}

// sleepUntil sleeps until t or ctx ends; false when ctx ended.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// send makes one GET with the key header and drains the body so the
// connection is reused; it returns the status, or 0 and the error.
func send(ctx context.Context, c *http.Client, url, header, key string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set(header, key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func newLoadClient(idle int) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			MaxIdleConnsPerHost: idle,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
		},
	}
}

// runPhase sends the well-behaved clients' traffic (and the attacker's when
// withAttacker) to url for plan.dur. Every loop stops at the phase's end.
func runPhase(ctx context.Context, url string, plan attackPlan, withAttacker bool) (goodStats, *attackerStats) {
	start := time.Now().Add(50 * time.Millisecond)
	end := start.Add(plan.dur)
	interval := time.Duration(float64(time.Second) / plan.clientRate)

	goodClient := newLoadClient(plan.clients + 8)
	lat := make([][]time.Duration, plan.clients)
	var sent, ok, refused, errs atomic.Int64
	var wg sync.WaitGroup
	for i := range plan.clients {
		wg.Go(func() {
			key := fmt.Sprintf("%s%02d", goodKeyPrefix, i)
			// Stagger the clients evenly over one interval.
			for next := start.Add(interval * time.Duration(i) / time.Duration(plan.clients)); next.Before(end); next = next.Add(interval) {
				if !sleepUntil(ctx, next) {
					return
				}
				t0 := time.Now()
				code, err := send(ctx, goodClient, url, plan.header, key)
				d := time.Since(t0)
				sent.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
				case code == http.StatusOK:
					ok.Add(1)
					lat[i] = append(lat[i], d)
				default:
					refused.Add(1)
					lat[i] = append(lat[i], d)
				}
			}
		})
	}

	var att *attackerStats
	if withAttacker {
		att = &attackerStats{}
		attackClient := newLoadClient(maxAttackInFlight)
		var aOK, a429, aOther, aErr atomic.Int64
		sem := make(chan struct{}, maxAttackInFlight)
		var aw sync.WaitGroup
		aInterval := time.Duration(float64(time.Second) / plan.attackRate)
		for next := start; next.Before(end); next = next.Add(aInterval) {
			if !sleepUntil(ctx, next) {
				break
			}
			select {
			case sem <- struct{}{}:
			default:
				att.Dropped++
				continue
			}
			att.Sent++
			aw.Go(func() {
				defer func() { <-sem }()
				code, err := send(ctx, attackClient, url, plan.header, attackKey)
				switch {
				case err != nil:
					aErr.Add(1)
				case code == http.StatusOK:
					aOK.Add(1)
				case code == http.StatusTooManyRequests:
					a429.Add(1)
				default:
					aOther.Add(1)
				}
			})
		}
		aw.Wait()
		att.OK, att.Refused, att.Other, att.Errors = aOK.Load(), a429.Load(), aOther.Load(), aErr.Load()
		att.RateRPS = float64(att.Sent) / plan.dur.Seconds()
	}
	wg.Wait()

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	g := goodStats{
		Sent: sent.Load(), OK: ok.Load(), Refused: refused.Load(), Errors: errs.Load(),
		P50us: percentile(all, 50), P95us: percentile(all, 95), P99us: percentile(all, 99),
	}
	return g, att
}

// attackEnv is what every phase needs besides its target.
type attackEnv struct {
	upstreamAddr string
	hz           int64 // clock ticks per second
	ncpu         int   // CPUs of the machine
	quiet        quietGate
}

// measurePhase runs one phase against t and reads the upstream's and
// Valkey's counters, and the CPU, around it.
func (e attackEnv) measurePhase(ctx context.Context, t *target, plan attackPlan, withAttacker bool) (*phaseResult, error) {
	upstreamAddr := e.upstreamAddr
	before, err := upstreamCounts(ctx, upstreamAddr)
	if err != nil {
		return nil, err
	}
	// Every process of the scenario (proxy, Valkey, upstream) is a child of
	// this load generator, so its tree is "ours".
	oursBefore, err := treeTicks(os.Getpid())
	if err != nil {
		return nil, err
	}
	sysBefore, err := busyTicks()
	if err != nil {
		return nil, err
	}
	if err := e.quiet.wait(ctx); err != nil {
		return nil, err
	}
	wall := time.Now()
	var vBefore map[string]int64
	if t.storeAddr != "" {
		if vBefore, err = commandStats(t.storeAddr); err != nil {
			return nil, err
		}
	}
	good, att := runPhase(ctx, t.URL, plan, withAttacker)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	elapsed := time.Since(wall)
	oursAfter, err := treeTicks(os.Getpid())
	if err != nil {
		return nil, err
	}
	sysAfter, err := busyTicks()
	if err != nil {
		return nil, err
	}
	foreign := float64(sysAfter-sysBefore-(oursAfter-oursBefore)) / float64(e.hz)
	bg := min(max(0, 100*foreign/(elapsed.Seconds()*float64(e.ncpu))), 100)
	after, err := upstreamCounts(ctx, upstreamAddr)
	if err != nil {
		return nil, err
	}
	res := &phaseResult{Good: good, Attacker: att, BackgroundCPUPct: bg}
	var attReached int64
	res.Good.ReachedUpstream, attReached = reached(before, after)
	if att != nil {
		att.ReachedUpstream = attReached
		if att.Sent > 0 {
			att.RefusedShare = float64(att.Sent-attReached) / float64(att.Sent)
		}
	}
	if t.storeAddr != "" {
		vAfter, err := commandStats(t.storeAddr)
		if err != nil {
			return nil, err
		}
		d := diffStats(vBefore, vAfter)
		res.Valkey = &d
	}
	return res, nil
}

// runAttack runs the baseline and attack phases against every live target.
func (e attackEnv) runAttack(ctx context.Context, plan attackPlan, targets []*target, progress func(string)) []*attackResult {
	var results []*attackResult
	for _, t := range targets {
		r := &attackResult{ID: t.ID, Name: t.Name, Status: t.Status}
		results = append(results, r)
		if t.Status != "ok" || ctx.Err() != nil {
			continue
		}
		var err error
		if r.Baseline, err = e.measurePhase(ctx, t, plan, false); err != nil {
			r.Status = "failed: " + err.Error()
			continue
		}
		progress(fmt.Sprintf("%-28s baseline: good p95 %6.0f µs, %d sent, %d refused", t.Name, r.Baseline.Good.P95us, r.Baseline.Good.Sent, r.Baseline.Good.Refused))
		if r.Attack, err = e.measurePhase(ctx, t, plan, true); err != nil {
			r.Status = "failed: " + err.Error()
			continue
		}
		a := r.Attack.Attacker
		progress(fmt.Sprintf("%-28s attack:   good p95 %6.0f µs, %d refused; attacker %d sent, %d 429, %d reached upstream",
			t.Name, r.Attack.Good.P95us, r.Attack.Good.Refused, a.Sent, a.Refused, a.ReachedUpstream))
		fillValkeyRatios(r)
	}
	return results
}

// fillValkeyRatios derives the per-request Valkey figures of a Valkey row.
func fillValkeyRatios(r *attackResult) {
	b, a := r.Baseline, r.Attack
	if b.Valkey == nil || a.Valkey == nil || a.Attacker == nil {
		return
	}
	if b.Good.Sent > 0 {
		r.ScriptCallsPerGood = ptr(float64(b.Valkey.Scripts) / float64(b.Good.Sent))
	}
	if refused := a.Attacker.Refused; refused > 0 {
		r.EvalSHAPerRefused = ptr(float64(a.Valkey.EvalSHA) / float64(refused))
		if r.ScriptCallsPerGood != nil {
			served := float64(a.Good.Sent + a.Attacker.OK)
			r.ExcessPerRefused = ptr((float64(a.Valkey.Scripts) - *r.ScriptCallsPerGood*served) / float64(refused))
		}
	}
}

// attackMarkdown renders attack.md.
func attackMarkdown(rep attackReport, plan attackPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# rlproxy benchmark — attack scenario\n\n")
	metaMarkdown(&b, rep.Meta)
	fmt.Fprintf(&b, "- policy: leaky bucket 10 r/s, burst 20, nodelay, keyed by %s (nginx: `limit_req zone=api burst=20 nodelay`, `$http_x_api_key`)\n", plan.header)
	fmt.Fprintf(&b, "- %d well-behaved clients (keys %sNN) at %.1f r/s each; attacker (key %q) at %.0f r/s; each phase %s; loopback only\n\n",
		plan.clients, goodKeyPrefix, plan.clientRate, attackKey, plan.attackRate, plan.dur)
	fmt.Fprintf(&b, "| target | good p95 µs, alone | good p95 µs, under attack | × | good refused (alone / attack) | attacker sent (r/s) | attacker 429 | attacker reached upstream | refused without reaching upstream | EVALSHA / refused | excess script calls / refused | script calls / good req | bg CPU %% (alone / attack) |\n")
	fmt.Fprintf(&b, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var notes []string
	for _, r := range rep.Targets {
		if r.Status != "ok" {
			notes = append(notes, fmt.Sprintf("- %s: %s", r.Name, r.Status))
		}
		if r.Baseline == nil || r.Attack == nil || r.Attack.Attacker == nil {
			fmt.Fprintf(&b, "| %s | %s | | | | | | | | | | | |\n", r.Name, cell(r.Status))
			continue
		}
		g0, g1, a := r.Baseline.Good, r.Attack.Good, r.Attack.Attacker
		var change *float64
		if g0.P95us > 0 {
			change = ptr(g1.P95us / g0.P95us)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %s | %d / %d | %d (%.0f) | %d | %d | %.2f%% | %s | %s | %s | %.1f / %.1f |\n",
			r.Name, g0.P95us, g1.P95us, ratio(change), g0.Refused, g1.Refused, a.Sent, a.RateRPS, a.Refused,
			a.ReachedUpstream, 100*a.RefusedShare, num(r.EvalSHAPerRefused, 2), num(r.ExcessPerRefused, 2), num(r.ScriptCallsPerGood, 2),
			r.Baseline.BackgroundCPUPct, r.Attack.BackgroundCPUPct)
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, "\nNot measured:\n%s\n", strings.Join(notes, "\n"))
	}
	return b.String()
}
