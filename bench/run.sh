#!/usr/bin/env bash
# bench/run.sh — rlproxy benchmark suite. See bench/README.md.
#
#   bench/run.sh            throughput: every target, same wrk load, R rounds
#   bench/run.sh attack     attack scenario (what bench/attack.sh runs)
#
# Settings (environment):
#   BENCH_WRK="-t1 -c32 -d5s"      wrk options of the full-load pass
#   BENCH_HALF_WRK="-t1 -c8 -d5s"  wrk options of the half-load pass
#   BENCH_HALF_DELAY_MS=1          half load: each connection pauses N ms after a response
#   BENCH_R=3                      rounds (median reported)
#   BENCH_WARMUP=1s                unrecorded wrk run before each full-load run
#   BENCH_TARGETS=                 comma-separated ids (direct,nginx,nginx_limit_req,
#                                  caddy,minproxy,ceiling,rlproxy,rlproxy_accesslog,rlproxy_pool1,
#                                  rlproxy_memory,rlproxy_memory_std,rlproxy_valkey,
#                                  rlproxy_valkey_allot,
#                                  rlproxy_memory_keys,rlproxy_valkey_keys)
#   BENCH_UPSTREAM=nginx           throughput upstream: nginx (return 200, configs/
#                                  nginx-upstream.conf) or go (bench/upstream)
#   BENCH_NICE=0                   niceness of the servers and wrk (e.g. -20 as root on a
#                                  machine shared with other work: it yields to them)
#   BENCH_PROXY_CPUS=0             CPU(s) of the proxy under test
#   BENCH_LOAD_CPUS=1              CPU(s) of wrk, upstream, Valkey, load generator
#   BENCH_ATTACK_DURATION=10s      per phase; BENCH_ATTACK_CLIENTS=50,
#   BENCH_CLIENT_RATE=5            r/s per well-behaved client; BENCH_ATTACK_RATE=500
#   BENCH_QUIET_PCT=10             before each run, wait until other processes use
#   BENCH_QUIET_WAIT=30s           < this % of all CPUs (at most this long; 0 = off)
#   BENCH_MAX_BG_PCT=20            repeat (twice at most) a run disturbed by more than this
#   BENCH_OUT=bench/results        output directory
#   BENCH_KEEP=1                   keep the scratch dir (configs, logs) and print it
#   BENCH_BASE=REV                 A/B: also build rlproxy at git revision REV; each rlproxy
#                                  row gets a "@base" twin in the same rounds, and a mark
#                                  row ÷ twin ≥ 0.95
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
mode=throughput
if [[ ${1:-} == attack ]]; then mode=attack; shift; fi
if [[ $# -gt 0 ]]; then echo "usage: $0 [attack]" >&2; exit 2; fi

# Tools from Debian, installed only when one is missing.
need=()
command -v nginx >/dev/null || need+=(nginx-light)
command -v caddy >/dev/null || need+=(caddy)
command -v wrk >/dev/null || need+=(wrk)
command -v redis-server >/dev/null || need+=(redis-server)
command -v taskset >/dev/null || need+=(util-linux)
if ((${#need[@]})); then
	echo "installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq "${need[@]}" >/dev/null
fi
export PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { echo "go not found (want /usr/local/go/bin/go)" >&2; exit 1; }

# Builds: harness, upstream, minproxy; rlproxy when it builds.
bin=$here/.bin
mkdir -p "$bin"
# bench/ is a module of its own (its chart library stays out of the
# product's go.mod); rlproxy is built from the root module.
(cd "$here" && go build -o "$bin/benchrun" ./cmd/benchrun && go build -o "$bin/upstream" ./upstream && go build -o "$bin/minproxy" ./minproxy)
# The fasthttp ceiling is a module of its own (bench/ceiling); without the
# module proxy its row reads "not built" and the others are still measured.
if ! (cd "$here/ceiling" && go build -o "$bin/ceiling.new" .) >"$bin/ceiling-build.log" 2>&1; then
	rm -f "$bin/ceiling" "$bin/ceiling.new"
	echo "ceiling not built (bench/.bin/ceiling-build.log): $(head -n1 "$bin/ceiling-build.log")" >&2
else
	mv -f "$bin/ceiling.new" "$bin/ceiling"
fi
cd "$root"
if go build -o "$bin/rlproxy.new" ./cmd/rlproxy >"$bin/rlproxy-build.log" 2>&1; then
	mv -f "$bin/rlproxy.new" "$bin/rlproxy"
else
	rm -f "$bin/rlproxy" "$bin/rlproxy.new"
	echo "rlproxy not built (bench/.bin/rlproxy-build.log): $(grep -v "^#" "$bin/rlproxy-build.log" | head -n1)" >&2
fi

# A/B: BENCH_BASE=REV builds rlproxy at that revision too; every rlproxy row
# then gets a twin on it, measured in the same rounds (interleaved).
base_args=()
if [[ -n ${BENCH_BASE:-} ]]; then
	base_src=$(mktemp -d /tmp/rlbench-base.XXXXXX)
	git -C "$root" archive "$BENCH_BASE" | tar -x -C "$base_src"
	(cd "$base_src" && go build -o "$bin/rlproxy-base" ./cmd/rlproxy)
	rm -rf "$base_src"
	base_args=(-rlproxy-base "$bin/rlproxy-base")
	echo "A/B base: $(git -C "$root" rev-parse --short "$BENCH_BASE")" >&2
fi

run_dir=$(mktemp -d /tmp/rlbench.XXXXXX)
chmod 755 "$run_dir"
pid=
cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	# Belt and braces: every process group benchrun started, by id.
	if [[ -f $run_dir/pgids ]]; then
		while read -r g; do
			[[ $g =~ ^[0-9]+$ ]] && kill -KILL -- "-$g" 2>/dev/null || true
		done <"$run_dir/pgids"
	fi
	if [[ ${BENCH_KEEP:-} == 1 ]]; then
		echo "scratch dir kept: $run_dir" >&2
	else
		rm -rf "$run_dir"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

load_cpus=${BENCH_LOAD_CPUS:-1}
# The harness itself (and so wrk and the attack load generator) stays on the
# load CPUs; it pins each server explicitly.
taskset -c "$load_cpus" "$bin/benchrun" \
	-mode "$mode" \
	-bin "$bin" -configs "$here/configs" -rlproxy "$bin/rlproxy" \
	-out "${BENCH_OUT:-$here/results}" -run-dir "$run_dir" -wrk-script "$here/wrk/report.lua" \
	-proxy-cpus "${BENCH_PROXY_CPUS:-0}" -load-cpus "$load_cpus" \
	-wrk "${BENCH_WRK:--t1 -c32 -d5s}" -half-wrk "${BENCH_HALF_WRK:--t1 -c8 -d5s}" -half-delay-ms "${BENCH_HALF_DELAY_MS:-1}" \
	-r "${BENCH_R:-3}" -warmup "${BENCH_WARMUP:-1s}" -targets "${BENCH_TARGETS:-}" \
	-attack-duration "${BENCH_ATTACK_DURATION:-10s}" -attack-clients "${BENCH_ATTACK_CLIENTS:-50}" \
	-client-rate "${BENCH_CLIENT_RATE:-5}" -attack-rate "${BENCH_ATTACK_RATE:-500}" \
	-upstream "${BENCH_UPSTREAM:-nginx}" -nice "${BENCH_NICE:-0}" \
	-quiet-pct "${BENCH_QUIET_PCT:-10}" -quiet-wait "${BENCH_QUIET_WAIT:-30s}" -max-bg-pct "${BENCH_MAX_BG_PCT:-20}" \
	"${base_args[@]}" &
pid=$!
wait "$pid"
