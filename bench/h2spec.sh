#!/usr/bin/env bash
# bench/h2spec.sh — h2spec (github.com/summerwind/h2spec, `go install
# github.com/summerwind/h2spec/cmd/h2spec@latest`) against rlproxy on each
# engine: a TLS listener (a self-signed certificate made with openssl; h2 by
# ALPN) and a cleartext listener with server.h2c (prior knowledge), both
# forwarding to bench/upstream. Per engine and listener it prints h2spec's
# summary line; the whole output goes to
# bench/results/h2spec-DATE-ENGINE-{tls,h2c}.txt.
#
#   bench/h2spec.sh                 auto and std
#   ENGINES=auto bench/h2spec.sh
set -euo pipefail
cd "$(dirname "$0")/.."
engines=${ENGINES:-"auto std"}
h2spec=${H2SPEC:-$(command -v h2spec || echo "$(go env GOPATH)/bin/h2spec")}
[[ -x $h2spec ]] || { echo "h2spec not found: go install github.com/summerwind/h2spec/cmd/h2spec@latest" >&2; exit 1; }
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
go build -o "$tmp/rlproxy" ./cmd/rlproxy
(cd bench && go build -o "$tmp/upstream" ./upstream)
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 \
	-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null
"$tmp/upstream" -listen 127.0.0.1:18911 &
pids+=($!)
day=$(date -u +%Y-%m-%d)
mkdir -p bench/results

# waitport waits up to 20 s for a listener on 127.0.0.1:$1.
waitport() {
	for _ in $(seq 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "nothing listens on 127.0.0.1:$1" >&2
	return 1
}

for engine in $engines; do
	for mode in tls h2c; do
		case $mode in
		tls) server="{ engine: $engine }"; tls="tls: { cert_file: $tmp/cert.pem, key_file: $tmp/key.pem }"; flags=(-t -k) ;;
		h2c) server="{ engine: $engine, h2c: true }"; tls=""; flags=() ;;
		esac
		cat >"$tmp/$engine-$mode.yaml" <<-EOF
			listen: "127.0.0.1:18921"
			admin_listen: "127.0.0.1:18931"
			server: $server
			$tls
			upstreams: { app: { url: "http://127.0.0.1:18911" } }
			routes: [ { name: all, upstream: app } ]
		EOF
		"$tmp/rlproxy" -config "$tmp/$engine-$mode.yaml" 2>"$tmp/$engine-$mode.log" &
		pid=$!
		pids+=("$pid")
		waitport 18921
		out="bench/results/h2spec-$day-$engine-$mode.txt"
		{
			echo "# h2spec $("$h2spec" --version 2>&1 | head -n1) ${flags[*]} -p 18921; rlproxy server: $server; load average $(cut -d' ' -f1-3 /proc/loadavg)"
			"$h2spec" "${flags[@]}" -h 127.0.0.1 -p 18921 --max-header-length 4000 2>&1 | sed 's/\x1b\[[0-9;]*m//g' || true
		} >"$out"
		echo "$engine $mode: $(grep -E '^[0-9]+ tests, ' "$out" | tail -n1)"
		kill "$pid"
		wait "$pid" 2>/dev/null || true
	done
done
