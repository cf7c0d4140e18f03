#!/usr/bin/env bash
# bench/rls.sh — Envoy rate limit service: rlproxy's envoy_rls vs
# envoyproxy/ratelimit on one redis-server (same descriptors, same limit,
# same gRPC client: bench/cmd/rlsbench), decisions/s and p50/p99.
#
# envoyproxy/ratelimit is built from the Go module proxy into a temporary
# directory (never committed): `go install github.com/envoyproxy/ratelimit/src/service_cmd@$BENCH_RATELIMIT_VERSION`.
#
# Settings (environment):
#   BENCH_RLS_DURATION=5s      measured run per service and round (after a warm-up)
#   BENCH_RLS_WARMUP=1s        unmeasured run before each measured one
#   BENCH_RLS_ROUNDS=3         rounds, each measuring both services, their order
#                              alternating; medians and min–max are reported
#   BENCH_RLS_WORKERS=32       concurrent callers on one gRPC connection
#   BENCH_RLS_KEYS=1000        distinct remote_address values
#   BENCH_RLS_CPUS=            taskset CPU list for everything (redis-server, both
#                              services, the client); unset = not pinned
#   BENCH_RLS_NOTE=            a sentence added to the report's header
#   BENCH_RATELIMIT_VERSION=latest
#   BENCH_OUT=bench/results    output directory (rls.md)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
out=${BENCH_OUT:-$here/results}
command -v redis-server >/dev/null || { echo "rls.sh: redis-server missing (apt-get install redis-server)" >&2; exit 1; }
bin=$here/.bin
mkdir -p "$bin" "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== building rlproxy, rlsbench and envoyproxy/ratelimit@${BENCH_RATELIMIT_VERSION:-latest}"
(cd "$root" && go build -o "$bin/rlproxy" ./cmd/rlproxy) && (cd "$root/bench" && go build -o "$bin/rlsbench" ./cmd/rlsbench)
(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-mod=mod go install "github.com/envoyproxy/ratelimit/src/service_cmd@${BENCH_RATELIMIT_VERSION:-latest}")
pin=() note=${BENCH_RLS_NOTE:-}
if [[ -n ${BENCH_RLS_CPUS:-} ]]; then
  command -v taskset >/dev/null || { echo "rls.sh: taskset missing (apt-get install util-linux)" >&2; exit 1; }
  pin=(taskset -c "$BENCH_RLS_CPUS")
  note="Every process (redis-server, both services, the client) pinned to CPU(s) $BENCH_RLS_CPUS. $note"
else
  note="No process pinned. $note"
fi
note="${note% } rlproxy $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), envoyproxy/ratelimit $(go version -m "$tmp/service_cmd" | awk '$1 == "mod" { print $3 }'), $(date -u '+%F %H:%M UTC')."
"${pin[@]}" "$bin/rlsbench" -rlproxy "$bin/rlproxy" -ratelimit "$tmp/service_cmd" \
  -duration "${BENCH_RLS_DURATION:-5s}" -warmup "${BENCH_RLS_WARMUP:-1s}" -rounds "${BENCH_RLS_ROUNDS:-3}" \
  -workers "${BENCH_RLS_WORKERS:-32}" -keys "${BENCH_RLS_KEYS:-1000}" -note "$note" -out "$out/rls.md"
