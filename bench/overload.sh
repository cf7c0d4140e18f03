#!/usr/bin/env bash
# bench/overload.sh — the overload scenario of docs/reference/overload.md in its
# long form, and the same load through HAProxy 2.6 for comparison.
#
#   bench/overload.sh            # 30 s measured per run
#   OVERLOAD_SECONDS=10 bench/overload.sh
#
# An upstream of 8 workers × 20 ms (400 r/s, a Go server inside the test
# binary) is loaded open-loop at 3× its capacity by three classes (20 %
# critical, 30 % normal, 50 % batch, the batch load 4:1 from a heavy and a
# light client), through:
#   - rlproxy with adaptive_concurrency and priority classes 0.7/0.2/0.1
#     (internal/e2e TestOverloadPriorityClasses, asserting the targets);
#   - HAProxy (haproxy on PATH or /usr/sbin) with `server ... maxconn 8` (the
#     capacity, told by hand) and `http-request set-priority-class`, `timeout
#     queue 500ms` as rlproxy's queue_timeout (TestOverloadHAProxy, figures
#     only);
# then the capacity-halving run (TestOverloadCapacityChange: the limit every
# 100 ms). Each test logs its figures; the whole log goes to
# bench/results/overload-DATE.txt. Everything listens on 127.0.0.1 and stops
# with the test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${OVERLOAD_SECONDS:-30}
out="bench/results/overload-$(date -u +%Y-%m-%d).txt"
mkdir -p bench/results
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out"
RLPROXY_OVERLOAD_SECONDS=$secs RLPROXY_OVERLOAD_COMPARE=1 RLPROXY_OVERLOAD_FORCE=1 \
	go test -count=1 -timeout 30m -v -run 'TestOverload(PriorityClasses|HAProxy|CapacityChange)$' ./internal/e2e 2>&1 |
	grep -v 'rlproxy serving' | tee -a "$out"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out"
echo "written: $out"
