# shellcheck shell=bash
# latency.bash: a slow network between a simulated node and etcd, for
# bats/e2e_latency.bats (docs/e2e.md "Faults", docs/testing.md "Faults").
# Load it after lib/sim.
#
#   latency_proxy NAME [DELAY [JITTER]]  NAME reaches each etcd member only through
#                              slowproxy (tools/slowproxy): every chunk each way is
#                              held DELAY±JITTER (Go durations, default 0), in order
#   latency_set NAME DELAY [JITTER]      change NAME's delay while it runs; returns
#                              once the proxy has applied it (new chunks only)
#   latency_stop_all           end every proxy (teardown, before the nodes)
#
# The proxy runs in a session of its own (a simulated reboot kills the node's
# session, not its network), listens on ports the kernel picks (no port race)
# and reads NODE_DIR/latency on SIGHUP; its log is NODE_DIR/latency.log.
# The binary is $SLOWPROXY_BIN, default .tools/bin/slowproxy (make e2e builds it).

SLOWPROXY_BIN=${SLOWPROXY_BIN:-$REPO_ROOT/.tools/bin/slowproxy}

# _latency_loads NAME: how many times NAME's proxy has loaded its delay.
_latency_loads() {
	grep -c 'slowproxy: .* (load [0-9]*)$' "$(sim_node_dir "$1")/latency.log" 2>/dev/null || true
}
_latency_loads_ge() { (($(_latency_loads "$1") >= $2)); }

latency_proxy() {
	local name=$1 d ep args=() urls=() addr
	d="$(sim_node_dir "$name")"
	[[ -x "$SLOWPROXY_BIN" ]] || {
		echo "latency_proxy: $SLOWPROXY_BIN is missing: run 'make e2e' (it builds tools/slowproxy)" >&2
		return 1
	}
	echo "${2:-0s} ${3:-0s}" >"$d/latency"
	for ep in ${ETCD_ENDPOINTS//,/ }; do
		args+=(-route "127.0.0.1:0=${ep#http://}")
	done
	rm -f "$d/latency.addr" "$d/latency.pid"
	# shellcheck disable=SC2016
	setsid -f bash -c 'echo $$ >"$1"; shift; exec "$@"' latency-proxy "$d/latency.pid" \
		"$SLOWPROXY_BIN" "${args[@]}" -delay-file "$d/latency" -addr-file "$d/latency.addr" \
		</dev/null >>"$d/latency.log" 2>&1 3>&-
	_sim_wait 10 test -s "$d/latency.addr" || return 1
	while read -r addr _; do urls+=("http://$addr"); done <"$d/latency.addr"
	sed -i "s|^etcd_endpoints: .*|etcd_endpoints: $(_sim_yaml_list "$(IFS=,; echo "${urls[*]}")")|" "$d/config.yaml"
}

latency_set() {
	local d before
	d="$(sim_node_dir "$1")"
	before=$(_latency_loads "$1")
	echo "$2 ${3:-0s}" >"$d/latency"
	kill -HUP "$(cat "$d/latency.pid")" || return 1
	# A file it cannot parse is logged without "(load N)": this then times out.
	_sim_wait 5 _latency_loads_ge "$1" $((before + 1)) || {
		echo "latency_set: $1's proxy did not take '$2': $(tail -n 1 "$d/latency.log")" >&2
		return 1
	}
}

latency_stop_all() {
	local d pid
	[[ -n "${SIM_DIR:-}" && -d "$SIM_DIR/nodes" ]] || return 0
	for d in "$SIM_DIR"/nodes/*/; do
		[[ -f "$d/latency.pid" ]] || continue
		pid=$(cat "$d/latency.pid")
		[[ "$pid" =~ ^[0-9]+$ ]] && kill -KILL "$pid" 2>/dev/null
		rm -f "$d/latency.pid"
	done
	return 0
}
