package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// commandStats reads INFO commandstats from the server at addr: calls per
// command name (lower case, e.g. "evalsha").
func commandStats(addr string) (map[string]int64, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connecting to valkey: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n"); err != nil {
		return nil, fmt.Errorf("sending INFO: %w", err)
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("reading INFO reply: %w", err)
	}
	head = strings.TrimSpace(head)
	if !strings.HasPrefix(head, "$") {
		return nil, fmt.Errorf("reading INFO reply: unexpected %q", head)
	}
	n, err := strconv.Atoi(head[1:])
	if err != nil || n < 0 {
		return nil, fmt.Errorf("reading INFO reply: bad length %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("reading INFO reply: %w", err)
	}
	return parseCommandStats(string(body))
}

// parseCommandStats parses INFO commandstats (a fresh server has only the
// "# Commandstats" header) with lines such as
// "cmdstat_evalsha:calls=12,usec=34,usec_per_call=2.83,rejected_calls=0,failed_calls=0".
func parseCommandStats(info string) (map[string]int64, error) {
	stats := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, fields, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("parsing %s: %w", name, err)
				}
				stats[strings.ToLower(strings.TrimPrefix(name, "cmdstat_"))] = n
			}
		}
	}
	if len(stats) == 0 && !strings.Contains(info, "# Commandstats") {
		return nil, errors.New("parsing INFO commandstats: not a commandstats reply")
	}
	return stats, nil
}

// callDelta is the growth of INFO commandstats between two reads.
type callDelta struct {
	EvalSHA int64 `json:"evalsha"`
	Scripts int64 `json:"scripts"` // every isScriptCommand
	All     int64 `json:"all"`     // every command except info (our own reads)
}

func diffStats(before, after map[string]int64) callDelta {
	var d callDelta
	for name, n := range after {
		delta := n - before[name]
		if name == "info" {
			continue
		}
		d.All += delta
		if isScriptCommand(name) {
			d.Scripts += delta
		}
	}
	d.EvalSHA = after["evalsha"] - before["evalsha"]
	return d
}

// isScriptCommand reports whether a command runs a script server-side, as a
// limiter decision does (EVALSHA, EVAL, their _RO forms, FCALL).
func isScriptCommand(name string) bool {
	switch name {
	case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}
