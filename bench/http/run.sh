#!/bin/bash
# Benchmark of sandgate's Streamable HTTP transport (not part of make check).
#
#   bench/http/run.sh [SECONDS]       (needs wrk: apt-get install wrk; curl)
#
# 1. memory per idle session: the server's RSS before and after 1000 more
#    initialize requests, divided by 1000;
# 2. requests per second of ping and of tools/list: wrk, 64 keep-alive
#    connections, 2 threads, rotating over 64 pre-initialised sessions.
# Loopback only; the server is started here (port chosen by the kernel) and
# stopped at the end.  SANDGATE_BIN defaults to the build tree's sandgate.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${SANDGATE_BIN:-$here/../../sandgate}
secs=${1:-10}
command -v wrk >/dev/null || { echo "bench: wrk is missing: apt-get install wrk" >&2; exit 2; }
work=$(mktemp -d)
trap 'kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$work"' EXIT

SANDGATE_PLUGIN_DIR=${SANDGATE_PLUGIN_DIR:-$here/../../.libs} HOME=$work XDG_STATE_HOME=$work \
	"$bin" --set server.port=0 --set server.max_sessions=1200 --set log.level=warning http \
	2> "$work/stderr" &
spid=$!
# the "listening" line is at info level: wait for the socket instead
port=
for _ in $(seq 100); do
	port=$(ss -Hltnp 2>/dev/null | awk -v p="pid=$spid," '$0 ~ p { sub(/.*:/, "", $4); print $4; exit }')
	[ -n "$port" ] && break
	sleep 0.05
done
[ -n "$port" ] || { echo "bench: the server did not listen" >&2; cat "$work/stderr" >&2; exit 1; }
url=http://localhost:$port/mcp
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}'

new_session() {
	curl -s -D - -o /dev/null -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' -d "$init" "$url" |
		awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}' | tr -d '\r'
}
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$spid/status"; }

for _ in $(seq 64); do new_session; done > "$work/sessions"
# memory first, before the load has grown (and then returned) the heap
before=$(rss_kib)
for _ in $(seq 1000); do new_session; done > /dev/null
after=$(rss_kib)
mem="idle sessions: RSS $before KiB -> $after KiB with 1000 more: $(( (after - before) * 1024 / 1000 )) bytes per session"
echo "sandgate $("$bin" --version | head -1), $(nproc) cores, wrk -t2 -c64 -d${secs}s, 64 sessions"
for m in ping tools/list; do
	MCP_METHOD=$m MCP_SESSIONS=$work/sessions \
		wrk -t2 -c64 -d"${secs}s" --latency -s "$here/mcp.lua" "$url" > "$work/wrk.out"
	rps=$(awk '/^Requests\/sec/ { print $2 }' "$work/wrk.out")
	p99=$(awk '$1 == "99%" { print $2 }' "$work/wrk.out")
	bad=$(awk '/Non-2xx/ { print $NF }' "$work/wrk.out")
	errs=$(awk '/Socket errors/ { print }' "$work/wrk.out")
	printf '%-10s %10s req/s   p99 %-8s non-2xx %s %s\n' "$m" "$rps" "$p99" "${bad:-0}" "$errs"
done
echo "$mem"
