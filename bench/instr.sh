#!/usr/bin/env bash
# bench/instr.sh — instructions per request: a deterministic A/B of rlproxy
# builds (valgrind cachegrind). See bench/README.md, "Instructions per request".
#
#   bench/instr.sh REV|BIN|. ...      e.g. bench/instr.sh 78db09d .
#
# Each argument is a git revision (built from `git archive`), a built rlproxy
# binary, or "." (the working tree). The first is the base of the ratios.
# Each measurement runs one rlproxy under cachegrind twice, serving
# INSTR_N1 and INSTR_N1 + INSTR_N requests (bench/cmd/fixedload, 4 keep-alive
# connections, bench/upstream behind it); the difference of the two
# instruction totals over INSTR_N is the instructions per request, with
# start-up and shutdown cancelled out. A round measures every build on every
# configuration, builds in a new random order each round.
#
# Settings (environment):
#   INSTR_CONFIGS=nopolicy,memory  names of bench/configs/rlproxy-NAME.yaml
#                                  (valkey: a redis-server is started;
#                                  trace*: an OTLP sink, bench/cmd/otlpsink)
#   INSTR_ROUNDS=5                 rounds (median and spread reported)
#   INSTR_N1=2000 INSTR_N=10000    requests of the short run; measured requests
#   INSTR_GOGC=100                 the proxy's GOGC (off: the mutator alone)
#   INSTR_NGINX=                   names of bench/configs/nginx-NAME.conf (e.g.
#                                  limitreq) measured the same way each round,
#                                  as one process (master_process off), and
#                                  every rlproxy row's ratio to each reported
#   INSTR_OUT=                     also write the Markdown report to this file
#
# Why instructions: on this project's 2-core VM one wrk round of the same
# binary ranges 12,000–25,000 req/s, so req/s over 5–13 rounds cannot resolve
# 5 %; the instruction count of the same binary repeats within about 0.5 %
# (with GOGC=off within 0.1 %). It counts work, not time: cache misses, lock
# waits and syscall latency are not in it, so it complements bench/run.sh.
set -euo pipefail
shopt -s inherit_errexit # a failed load inside $(instructions …) stops the run

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
(($#)) || { sed -n 2,12p "$0" >&2; exit 2; }
command -v valgrind >/dev/null || {
	echo "installing valgrind" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
}
configs=${INSTR_CONFIGS:-nopolicy,memory}
nginx_confs=${INSTR_NGINX:-}
rounds=${INSTR_ROUNDS:-5} n1=${INSTR_N1:-2000} n=${INSTR_N:-10000} gogc=${INSTR_GOGC:-100}

bin=$here/.bin
mkdir -p "$bin"
(cd "$here" && go build -o "$bin/upstream" ./upstream && go build -o "$bin/fixedload" ./cmd/fixedload &&
	go build -o "$bin/otlpsink" ./cmd/otlpsink)

# build ARG: prints the path of the rlproxy binary ARG names.
build() {
	if [[ $1 == . ]]; then
		(cd "$root" && go build -o "$bin/rlproxy-worktree" ./cmd/rlproxy)
		echo "$bin/rlproxy-worktree"
	elif [[ -x $1 && -f $1 ]]; then
		echo "$1"
	else
		local rev src
		rev=$(git -C "$root" rev-parse --short "$1")
		if [[ ! -x $bin/rlproxy-$rev ]]; then
			src=$(mktemp -d /tmp/rlinstr-src.XXXXXX)
			git -C "$root" archive "$rev" | tar -x -C "$src"
			(cd "$src" && go build -o "$bin/rlproxy-$rev" ./cmd/rlproxy)
			rm -rf "$src"
		fi
		echo "$bin/rlproxy-$rev"
	fi
}

labels=() bins=()
for a in "$@"; do
	bins+=("$(build "$a")")
	labels+=("$a")
done

run_dir=$(mktemp -d /tmp/rlinstr.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	rm -rf "$run_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

up_port=$("$bin/fixedload" -free-port)
"$bin/upstream" -listen "127.0.0.1:$up_port" >/dev/null 2>&1 &
pids+=($!)
valkey_port=
if [[ ,$configs, == *,valkey* ]]; then
	valkey_port=$("$bin/fixedload" -free-port)
	redis-server --port "$valkey_port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
	pids+=($!)
fi
otlp_port=
if [[ ,$configs, == *,trace* ]]; then
	otlp_port=$("$bin/fixedload" -free-port)
	"$bin/otlpsink" -listen "127.0.0.1:$otlp_port" >/dev/null &
	pids+=($!)
fi

# config NAME PORT BIN: writes NAME's config for BIN listening on PORT and
# prints its path. shutdown_delay 0s where BIN knows it (builds before it
# do not wait anyway).
config() {
	local f=$run_dir/$1-$2.yaml
	sed -e "s/127\.0\.0\.1:18180/127.0.0.1:$2/; s/127\.0\.0\.1:18100/127.0.0.1:$up_port/" \
		-e "s/127\.0\.0\.1:18379/127.0.0.1:${valkey_port:-18379}/; s/^admin_listen: .*/admin_listen: \"\"/" \
		-e "s/127\.0\.0\.1:18317/127.0.0.1:${otlp_port:-18317}/" \
		"$here/configs/rlproxy-$1.yaml" >"$f"
	if ! grep -q '^server:' "$f"; then
		cp "$f" "$f.try"
		printf 'server:\n  shutdown_delay: 0s\n' >>"$f.try"
		if "$3" validate -config "$f.try" >/dev/null 2>&1; then mv "$f.try" "$f"; fi
	fi
	echo "$f"
}

# instructions CFG BIN REQUESTS: total instructions BIN executes serving
# REQUESTS requests on CFG, start to exit.
instructions() {
	local port out p
	port=$(sed -n 's/^listen: "127\.0\.0\.1:\([0-9]*\)"/\1/p' "$1")
	out=$run_dir/cg.out
	# In the scratch dir: a config's relative paths (the access log's) land there.
	(cd "$run_dir" && GOGC=$gogc GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 exec valgrind --tool=cachegrind \
		--cache-sim=no --cachegrind-out-file="$out" "$2" -config "$1" >"$run_dir/log" 2>&1) &
	p=$!
	pids+=($p)
	if ! "$bin/fixedload" -url "http://127.0.0.1:$port/bench" -n "$3" -c 4; then
		kill -KILL "$p" 2>/dev/null || true
		echo "load failed on $2 ($1); its log: $(tail -n 3 "$run_dir/log")" >&2
		return 1
	fi
	kill -TERM "$p"
	wait "$p" || true
	awk '/^summary:/ {print $2}' "$out"
}

# nginx_config NAME PORT: writes configs/nginx-NAME.conf for one process
# listening on PORT in front of the upstream and prints its path; the
# master_process and daemon lines go, since -g sets them.
nginx_config() {
	local f=$run_dir/nginx-$1/nginx.conf
	mkdir -p "$run_dir/nginx-$1/tmp"
	sed -e "s/127\.0\.0\.1:18180/127.0.0.1:$2/; s/127\.0\.0\.1:18100/127.0.0.1:$up_port/" \
		-e '/^daemon /d; /^master_process /d' "$here/configs/nginx-$1.conf" >"$f"
	echo "$f"
}

# nginx_instructions CONF REQUESTS: total instructions nginx executes
# serving REQUESTS requests on CONF, start to exit (SIGTERM: fast shutdown),
# as one process (master_process off), as rlproxy runs with GOMAXPROCS=1.
nginx_instructions() {
	local port out p
	port=$(sed -n 's/^ *listen 127\.0\.0\.1:\([0-9]*\);/\1/p' "$1")
	out=$run_dir/cg.out
	(cd "$(dirname "$1")" && exec valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out" \
		nginx -p "$(dirname "$1")/" -c "$1" -e stderr -g 'daemon off; master_process off;' >"$run_dir/log" 2>&1) &
	p=$!
	pids+=($p)
	if ! "$bin/fixedload" -url "http://127.0.0.1:$port/bench" -n "$2" -c 4; then
		kill -KILL "$p" 2>/dev/null || true
		echo "load failed on nginx ($1); its log: $(tail -n 3 "$run_dir/log")" >&2
		return 1
	fi
	kill -TERM "$p"
	wait "$p" || true
	awk '/^summary:/ {print $2}' "$out"
}

raw=$run_dir/raw.txt
for r in $(seq 1 "$rounds"); do
	for ng in ${nginx_confs//,/ }; do
		port=$("$bin/fixedload" -free-port)
		f=$(nginx_config "$ng" "$port")
		a=$(nginx_instructions "$f" "$n1")
		b=$(nginx_instructions "$f" $((n1 + n)))
		echo "$r nginx-$ng nginx $(((b - a) / n))" | tee -a "$raw" >&2
	done
	for cfg in ${configs//,/ }; do
		for i in $(seq 0 $((${#bins[@]} - 1)) | shuf); do
			port=$("$bin/fixedload" -free-port)
			f=$(config "$cfg" "$port" "${bins[$i]}")
			a=$(instructions "$f" "${bins[$i]}" "$n1")
			b=$(instructions "$f" "${bins[$i]}" $((n1 + n)))
			echo "$r $cfg $i $(((b - a) / n))" | tee -a "$raw" >&2
		done
	done
done

# median: the median of the numbers on stdin, one per line.
median() {
	sort -g | awk '{x[NR] = $1} END {if (NR % 2) print x[(NR + 1) / 2]; else printf "%.4f\n", (x[NR / 2] + x[NR / 2 + 1]) / 2}'
}

# row CFG I: one report row for build I on CFG.
row() {
	local vals ratios
	vals=$(awk -v c="$1" -v i="$2" '$2 == c && $3 == i {print $4}' "$raw")
	ratios=$(awk -v c="$1" -v i="$2" '$2 == c && $3 == 0 {b[$1] = $4} $2 == c && $3 == i {v[$1] = $4}
		END {for (r in v) if (r in b) printf "%.4f\n", v[r] / b[r]}' "$raw")
	printf '| %s | %s | %.0f | %s–%s | %.3f |\n' "$1" "${labels[$2]}" "$(median <<<"$vals")" \
		"$(sort -n <<<"$vals" | head -n1)" "$(sort -n <<<"$vals" | tail -n1)" "$(median <<<"$ratios")"
}

# nginx_row NG: nginx-NG's row, then every rlproxy row's ratio to it (the
# median of per-round ratios: both measured in the same round).
nginx_row() {
	local vals
	vals=$(awk -v c="nginx-$1" '$2 == c {print $4}' "$raw")
	printf '| nginx-%s.conf | %.0f | %s–%s |\n' "$1" "$(median <<<"$vals")" \
		"$(sort -n <<<"$vals" | head -n1)" "$(sort -n <<<"$vals" | tail -n1)"
}
nginx_ratios() {
	local cfg i
	for cfg in ${configs//,/ }; do
		for i in $(seq 0 $((${#bins[@]} - 1))); do
			printf '| %s | %s | %.3f |\n' "$cfg" "${labels[$i]}" "$(awk -v c="$cfg" -v i="$i" -v g="nginx-$1" \
				'$2 == g {b[$1] = $4} $2 == c && $3 == i {v[$1] = $4}
				END {for (r in v) if (r in b) printf "%.4f\n", v[r] / b[r]}' "$raw" | median)"
		done
	done
}

report() {
	echo "## Instructions per request ($(date -u +%Y-%m-%dT%H:%MZ), GOGC=$gogc, $rounds rounds, $n requests each)"
	echo
	echo "| config | build | median instr/req | min–max | ÷ ${labels[0]} (median of per-round ratios) |"
	echo "|---|---|--:|---|--:|"
	for cfg in ${configs//,/ }; do
		for i in $(seq 0 $((${#bins[@]} - 1))); do row "$cfg" "$i"; done
	done
	[[ -n $nginx_confs ]] || return 0
	echo
	echo "| nginx (one process, same load and upstream) | median instr/req | min–max |"
	echo "|---|--:|---|"
	for ng in ${nginx_confs//,/ }; do nginx_row "$ng"; done
	for ng in ${nginx_confs//,/ }; do
		echo
		echo "| config | build | ÷ nginx-$ng.conf (median of per-round ratios) |"
		echo "|---|---|--:|"
		nginx_ratios "$ng"
	done
}
report
if [[ -n ${INSTR_OUT:-} ]]; then
	{ report; echo; echo "Raw (round config build instr/req):"; echo; sed 's/^/    /' "$raw"; } >"$INSTR_OUT"
fi
