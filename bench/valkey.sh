#!/usr/bin/env bash
# bench/valkey.sh — Valkey store decisions/s vs the server's ceiling.
#
# Starts one redis-server (no persistence) pinned to BENCH_SERVER_CPUS, loads
# rlproxy's decision script (bench/cmd/valkeyscript, SCRIPT LOAD; its SHA must
# equal valkey.ScriptSHA) and, for BENCH_R rounds:
#   - redis-benchmark -P 16 EVALSHA of that script with the arguments
#     Store.Decide sends for one token bucket check, on distinct keys
#     (-r 1000000, rl:v1:{ip:__rand_int__}:api) and on one hot key, pinned to
#     BENCH_CLIENT_CPUS, at each -c of BENCH_RB_CLIENTS; the round's ceiling
#     is the best of them (few connections with deep pipelines cost the
#     server less per command than many shallow ones);
#   - BenchmarkValkeyDecide (internal/store/valkey) against the same server,
#     pinned to BENCH_CLIENT_CPUS: 1, 4, 16, 64, 256 concurrent callers.
# Prints medians over rounds and writes bench/results/valkey.{md,txt}.
#
# Settings (environment):
#   BENCH_R=3                 rounds (median reported)
#   BENCH_SERVER_CPUS=0       taskset CPU list of redis-server
#   BENCH_CLIENT_CPUS=1       taskset CPU list of redis-benchmark and the Go benchmark
#   BENCH_GO_BENCHTIME=2s     -test.benchtime of each Go sub-benchmark
#   BENCH_RB_N=300000         requests per redis-benchmark run
#   BENCH_RB_CLIENTS="4 16 64 256"  redis-benchmark connections (-c); pipeline is -P 16
#   BENCH_QUIET_PCT=10        before each run wait (at most BENCH_QUIET_WAIT seconds,
#   BENCH_QUIET_WAIT=30       then run anyway) until the CPUs are < this % busy
#   BENCH_OUT=bench/results   output directory
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
R=${BENCH_R:-3}
SCPU=${BENCH_SERVER_CPUS:-0}
CCPU=${BENCH_CLIENT_CPUS:-1}
BT=${BENCH_GO_BENCHTIME:-2s}
RBN=${BENCH_RB_N:-300000}
RBC=${BENCH_RB_CLIENTS:-4 16 64 256}
QPCT=${BENCH_QUIET_PCT:-10}
QWAIT=${BENCH_QUIET_WAIT:-30}
out=${BENCH_OUT:-$here/results}
for t in redis-server redis-cli redis-benchmark taskset; do
	command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
done
export PATH=$PATH:/usr/local/go/bin
mkdir -p "$out"
scratch=$(mktemp -d)
srv=
cleanup() {
	if [[ -n $srv ]]; then kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; fi
	rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cd "$root"
go test -c -o "$scratch/valkey.test" ./internal/store/valkey
(cd bench && go run ./cmd/valkeyscript) >"$scratch/script.lua"
want_sha=$(cd bench && go run ./cmd/valkeyscript -sha)

# A free loopback port: one nobody answers on.
port=
for _ in $(seq 50); do
	p=$((20000 + RANDOM % 20000))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[[ -n $port ]] || { echo "no free port" >&2; exit 1; }

taskset -c "$SCPU" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
	--logfile "$scratch/redis.log" &
srv=$!
for _ in $(seq 100); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.05
done
rc() { redis-cli -p "$port" "$@"; }
sha=$(rc -x SCRIPT LOAD <"$scratch/script.lua")
if [[ $sha != "$want_sha" ]]; then
	echo "SCRIPT LOAD gave $sha, valkey.ScriptSHA is $want_sha: not the same script" >&2
	exit 1
fi
ver=$(rc INFO server | tr -d '\r' | awk -F: '/^redis_version/{print $2}')

# The arguments Store.Decide sends for one check of benchBucket
# (internal/store/valkey/bench_test.go): now=0 (server TIME), mode 0,
# n=1 (one request), kind 4 (token bucket), Count, Period, Burst, Delay,
# NoDelay, cost, lease.
args=(0 0 1 4 30000000 3600000 30000000 0 0 1 "")
rb() { # rb CONNS KEY [extra redis-benchmark flags] -> requests/s
	local c=$1 key=$2; shift 2
	taskset -c "$CCPU" redis-benchmark -p "$port" -c "$c" -P 16 -n "$RBN" --csv "$@" \
		EVALSHA "$sha" 1 "$key" "${args[@]}" | awk -F'"' 'NR==2{print $4}'
}
# busy prints the % of all CPUs busy over the next second (/proc/stat).
busy() {
	local a b
	a=($(head -n1 /proc/stat)); sleep 1; b=($(head -n1 /proc/stat))
	local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )) total=0 i
	for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
	echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}
# quiet waits until other processes leave the CPUs mostly idle (the server
# is idle between runs), at most QWAIT seconds; it logs what it saw.
quiet() {
	local t=0 u
	[[ $QPCT -gt 0 ]] || return 0
	while u=$(busy); [[ $u -ge $QPCT && $t -lt $QWAIT ]]; do t=$((t + 1)); done
	echo "busy ${u}% before $1 (waited ${t}s)" >>"$raw"
}

raw=$out/valkey.txt
: >"$raw"
{
	echo "# bench/valkey.sh $(date -u +%FT%TZ) redis $ver, server cpus $SCPU, client cpus $CCPU, $(nproc) cpus"
	echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$raw"
for r in $(seq "$R"); do
	rc FLUSHALL >/dev/null
	echo "round $r/$R: redis-benchmark" >&2
	for k in distinct hot; do
		best=0
		for c in $RBC; do
			quiet "redis-benchmark $k -c $c"
			if [[ $k == distinct ]]; then v=$(rb "$c" 'rl:v1:{ip:__rand_int__}:api' -r 1000000); else v=$(rb "$c" 'rl:v1:{ip:192.0.2.7}:api'); fi
			echo "rb $k $c $v" >>"$raw"
			best=$(awk -v a="$best" -v b="$v" 'BEGIN{print (b > a ? b : a)}')
		done
		echo "ceiling $k $best" >>"$raw"
	done
	echo "round $r/$R: go test -bench BenchmarkValkeyDecide" >&2
	for k in distinct hot; do
		for c in 1 4 16 64 256; do
			quiet "go bench $k $c"
			RLPROXY_BENCH_VALKEY=127.0.0.1:$port taskset -c "$CCPU" "$scratch/valkey.test" \
				-test.run '^$' -test.bench "^BenchmarkValkeyDecide/keys=$k/callers=$c\$" \
				-test.benchtime "$BT" -test.benchmem |
				tee -a "$raw.go" |
				awk '/^BenchmarkValkeyDecide\//{
					split($1, p, "/"); sub(/^keys=/, "", p[2]); c = p[3]; sub(/^callers=/, "", c); sub(/-[0-9]+$/, "", c)
					for (i = 1; i <= NF; i++) if ($(i+1) == "decisions/s") v = $i; else if ($(i+1) == "allocs/op") a = $i
					print "go", p[2], c, v, a }' >>"$raw"
		done
	done
	echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"
done
cat "$raw.go" >>"$raw"
rm -f "$raw.go"

median() { sort -g | awk '{v[NR]=$1} END{if (NR) print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
spread() { sort -g | awk '{v[NR]=$1} END{if (NR) printf "%.0f–%.0f", v[1], v[NR]}'; }
{
	echo "Valkey store decisions/s (median of $R rounds; range in brackets): redis $ver, server on CPU $SCPU,"
	echo "client on CPU $CCPU; ceiling = best of redis-benchmark -c {$RBC} -P 16 EVALSHA of the same script and arguments."
	echo
	echo "| keys | callers | Store.Decide decisions/s | allocs/decision | ceiling (redis-benchmark) | ratio |"
	echo "|---|---|---|---|---|---|"
	for k in distinct hot; do
		ceil=$(awk -v k=$k '$1=="ceiling" && $2==k {print $3}' "$raw" | median)
		crange=$(awk -v k=$k '$1=="ceiling" && $2==k {print $3}' "$raw" | spread)
		for c in 1 4 16 64 256; do
			v=$(awk -v k=$k -v c=$c '$1=="go" && $2==k && $3==c {print $4}' "$raw" | median)
			vr=$(awk -v k=$k -v c=$c '$1=="go" && $2==k && $3==c {print $4}' "$raw" | spread)
			a=$(awk -v k=$k -v c=$c '$1=="go" && $2==k && $3==c {print $5}' "$raw" | median)
			ratio=$(awk -v v="$v" -v c="$ceil" 'BEGIN{if (c > 0) printf "%.2f", v / c}')
			printf '| %s | %s | %.0f [%s] | %s | %.0f [%s] | %s |\n' "$k" "$c" "$v" "$vr" "$a" "$ceil" "$crange" "$ratio"
		done
	done
} | tee "$out/valkey.md"
