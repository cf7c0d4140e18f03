#!/usr/bin/env bash
# bench/accesslog.sh — does the access log lose a line below its buffer's
# bound? (The mark: "under wrk -c32 with the log on ... no line is lost".)
#
# Each round starts rlproxy on bench/configs/rlproxy-accesslog.yaml (no
# policy, JSON lines to a file) in front of bench/upstream, with its admin
# listener on, drives it with wrk, and then compares
#   requests  rlproxy_http_requests_total summed over routes and codes
#             (the admin /metrics, scraped once wrk is done)
#   dropped   rlproxy_access_log_dropped_total (lines the full buffer refused)
#   lines     lines in the access log once rlproxy has exited on SIGTERM
#             (shutdown writes every queued line)
# The round fails unless lines + dropped = requests, and, with
# log.access.buffer at its default (4096), unless dropped = 0. wrk's own
# count is printed too (it may miss a response still in flight at its end).
#
# Settings (environment):
#   BENCH_WRK="-t1 -c32 -d5s"   wrk options
#   BENCH_R=3                   rounds (a fresh rlproxy and log each)
#   BENCH_ACCESSLOG_BUFFER=     log.access.buffer (16..1048576); unset = the default
#   BENCH_PROXY_CPUS=0          taskset CPU list of rlproxy
#   BENCH_LOAD_CPUS=1           taskset CPU list of wrk and the upstream
#   BENCH_KEEP=1                keep the scratch dir (configs, logs) and print it
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
WRK=${BENCH_WRK:--t1 -c32 -d5s}
R=${BENCH_R:-3}
BUF=${BENCH_ACCESSLOG_BUFFER:-}
PCPU=${BENCH_PROXY_CPUS:-0}
LCPU=${BENCH_LOAD_CPUS:-1}
for t in wrk curl taskset; do
	command -v "$t" >/dev/null || { echo "accesslog.sh: $t not found (apt-get install wrk curl util-linux)" >&2; exit 1; }
done
export PATH=$PATH:/usr/local/go/bin

bin=$here/.bin
mkdir -p "$bin"
(cd "$root" && go build -o "$bin/rlproxy" ./cmd/rlproxy)
(cd "$here" && go build -o "$bin/upstream" ./upstream)
scratch=$(mktemp -d /tmp/rlaccesslog.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	if [[ ${BENCH_KEEP:-} == 1 ]]; then echo "kept $scratch" >&2; else rm -rf "$scratch"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# freeport prints a loopback port nobody answers on.
freeport() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
	echo "accesslog.sh: no free port" >&2
	exit 1
}

# waitfor URL: until it answers 200 (10 s at most).
waitfor() {
	for _ in $(seq 200); do
		curl -fso /dev/null "$1" && return 0
		sleep 0.05
	done
	echo "accesslog.sh: $1 never answered" >&2
	exit 1
}

# render DIR LISTEN ADMIN UPSTREAM: the bench config with this round's
# ports, the admin listener on, no shutdown delay, and the buffer when set.
render() {
	local src=$here/configs/rlproxy-accesslog.yaml access='access: { format: json, path: access.log }'
	for from in '127.0.0.1:18180' '127.0.0.1:18100' 'admin_listen: ""' "$access"; do
		[[ $(grep -v '^#' "$src" | grep -cF "$from") == 1 ]] || { echo "accesslog.sh: $src lacks \"$from\" (once)" >&2; exit 1; }
	done
	local with=$access
	[[ -z $BUF ]] || with="access: { format: json, path: access.log, buffer: $BUF }"
	sed -e "s/127\.0\.0\.1:18180/127.0.0.1:$2/" -e "s/127\.0\.0\.1:18100/127.0.0.1:$4/" \
		-e "s/admin_listen: \"\"/admin_listen: \"127.0.0.1:$3\"/" -e "s/$access/$with/" "$src" >"$1/rlproxy.yaml"
	printf 'server: { shutdown_delay: 0s }\n' >>"$1/rlproxy.yaml"
}

# sumof NAME: the sum of a metric's samples in the scrape on stdin.
sumof() { awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%d", s }'; }

# round N: one rlproxy, one wrk run; prints a table row, returns 1 on a lost line.
round() {
	local dir=$scratch/round$1 lp ap up upid rpid
	mkdir -p "$dir"
	lp=$(freeport) ap=$(freeport) up=$(freeport)
	render "$dir" "$lp" "$ap" "$up"
	taskset -c "$LCPU" "$bin/upstream" -listen "127.0.0.1:$up" >"$dir/upstream.log" 2>&1 &
	upid=$!
	pids=("$upid")
	waitfor "http://127.0.0.1:$up/"
	taskset -c "$PCPU" "$bin/rlproxy" -config "$dir/rlproxy.yaml" >"$dir/rlproxy.log" 2>&1 &
	rpid=$!
	pids+=("$rpid")
	waitfor "http://127.0.0.1:$ap/readyz"
	# shellcheck disable=SC2086 # BENCH_WRK is a list of options
	taskset -c "$LCPU" wrk $WRK "http://127.0.0.1:$lp/" >"$dir/wrk.txt"
	sleep 0.5 # a response wrk gave up on at its deadline is still counted and logged
	curl -fs "http://127.0.0.1:$ap/metrics" >"$dir/metrics.txt"
	kill -TERM "$rpid"
	if ! wait "$rpid"; then echo "accesslog.sh: rlproxy did not exit cleanly (log: $dir/rlproxy.log)" >&2; return 1; fi
	kill "$upid"
	wait "$upid" 2>/dev/null || true
	pids=()
	local requests dropped lines sent verdict=ok
	requests=$(sumof rlproxy_http_requests_total <"$dir/metrics.txt")
	dropped=$(sumof rlproxy_access_log_dropped_total <"$dir/metrics.txt")
	grep -q '^rlproxy_access_log_dropped_total ' "$dir/metrics.txt" || { echo "accesslog.sh: no rlproxy_access_log_dropped_total in /metrics" >&2; return 1; }
	lines=$(wc -l <"$dir/access.log")
	sent=$(awk '/requests in/ { print $1 }' "$dir/wrk.txt")
	if command -v jq >/dev/null && ! jq -e . "$dir/access.log" >/dev/null; then verdict="FAIL (a line is not JSON)"; fi
	if ((lines + dropped != requests)); then verdict="FAIL (lines + dropped != requests: $((requests - lines - dropped)) lost)"; fi
	if [[ -z $BUF ]] && ((dropped > 0)); then verdict="FAIL (dropped with the default buffer)"; fi
	printf '| %d | %d | %d | %d | %d | %s |\n' "$1" "$sent" "$requests" "$lines" "$dropped" "$verdict"
	[[ $verdict == ok ]]
}

echo "wrk $WRK, log.access.buffer ${BUF:-4096 (default)}, rlproxy on CPU $PCPU, wrk and upstream on CPU $LCPU, $(date -u '+%F %H:%M UTC')"
echo
echo "| round | wrk requests | rlproxy_http_requests_total | log lines | rlproxy_access_log_dropped_total | verdict |"
echo "|--:|--:|--:|--:|--:|---|"
failed=0
for i in $(seq "$R"); do round "$i" || failed=1; done
exit "$failed"
