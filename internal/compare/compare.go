// Package compare replays docs/PRODUCT.md's reference experiment (docs/PRODUCT.md
// "Reference experiment") through a store.Store — the memory store or the
// Valkey scripts — and prints the table docs/CONTRACT.md fixes for
// `rlproxy compare`: accepted/sent per pattern and algorithm, the leaky
// bucket's longest waits, and the most requests reaching the upstream in any
// 1 s of the edge traffic. It also reproduces the race (GET-compare-INCR
// versus one atomic decision) and the memory each algorithm keeps per client.
package compare

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// Cell is one (pattern, algorithm) replay.
type Cell struct {
	Accepted, Sent int
	// LongestWait is the longest accepted request's wait for its turn (ms).
	LongestWait int64
	// Served are the accepted requests' serve times (arrival + wait, Unix ms), ascending.
	Served []int64
}

// Table is the experiment's outcome: Cells[pattern][algorithm] in the
// order of algo.ReferencePatterns and algo.ReferenceLimits.
type Table struct {
	Patterns []string
	Limits   []algo.Limit
	Cells    [][]Cell
}

// Run replays every reference pattern against every reference limit on st,
// each on fresh keys (a random run id in the client part of the key, under
// prefix), with the arrival times injected as `now`. Errors: the store's.
func Run(ctx context.Context, st store.Store, prefix string) (*Table, error) {
	run := runID()
	t := &Table{Limits: algo.ReferenceLimits()}
	var out [1]algo.Decision
	for _, p := range algo.ReferencePatterns() {
		t.Patterns = append(t.Patterns, p.Name)
		row := make([]Cell, len(t.Limits))
		for j, lim := range t.Limits {
			key := fmt.Sprintf("%s%s{compare-%s-%s}:%s", prefix, store.KeyVersion, run, p.Name, strings.ReplaceAll(lim.Kind.String(), " ", "-"))
			c := Cell{Sent: len(p.Times)}
			for _, now := range p.Times {
				ck := [1]store.Check{{Key: key, Limit: lim, Cost: 1}}
				if _, err := st.Decide(ctx, ck[:], now, out[:]); err != nil {
					return nil, fmt.Errorf("replaying %s on %s: %w", p.Name, lim.Kind, err)
				}
				if d := out[0]; d.Allowed {
					c.Accepted++
					c.LongestWait = max(c.LongestWait, d.Wait)
					c.Served = append(c.Served, now+d.Wait)
				}
			}
			slices.Sort(c.Served)
			row[j] = c
		}
		t.Cells = append(t.Cells, row)
	}
	return t, nil
}

// MostPerSecond is the most requests reaching the upstream in any closed
// 1 s interval of pattern i for limit j.
func (t *Table) MostPerSecond(i, j int) int { return algo.MostInWindow(t.Cells[i][j].Served, 1000) }

// Print writes the table in docs/CONTRACT.md's `rlproxy compare` format.
func (t *Table) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "traffic")
	for _, l := range t.Limits {
		fmt.Fprintf(tw, "\t%s", l.Kind)
	}
	fmt.Fprintln(tw)
	for i, name := range t.Patterns {
		fmt.Fprint(tw, name)
		for _, c := range t.Cells[i] {
			fmt.Fprintf(tw, "\t%d/%d", c.Accepted, c.Sent)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	leaky := slices.IndexFunc(t.Limits, func(l algo.Limit) bool { return l.Kind == algo.LeakyBucket })
	for i, name := range t.Patterns {
		fmt.Fprintf(w, "leaky bucket, %s: longest wait for its turn %s s\n", name, tenths(t.Cells[i][leaky].LongestWait))
	}
	edge := slices.Index(t.Patterns, "edge")
	for j, l := range t.Limits {
		fmt.Fprintf(w, "%s: most requests reaching the upstream in any 1 s: %d\n", l.Kind, t.MostPerSecond(edge, j))
	}
	return nil
}

// tenths formats ms as seconds to the nearest 0.1 (half up): 8550 → "8.6".
func tenths(ms int64) string {
	d := (ms + 50) / 100
	return fmt.Sprintf("%d.%d", d/10, d%10)
}

func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
