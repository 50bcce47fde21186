# monitoring.bash: Debian's real Alertmanager and tools/receiver (a local
# notification receiver) on free loopback ports, for the e2e tests and the
# demo. Needs etcd.bash (etcd_free_port). Each function returns non-zero with
# a message on stderr when something does not start; the caller fails or dies.

# am_start DIR: an Alertmanager with its data in DIR, on a free loopback port,
# without clustering; sets AM_URL and AM_PID. AM_BIN overrides the binary.
am_start() {
	local dir=$1 i bin=${AM_BIN:-${CRD_TEST_ALERTMANAGER:-/usr/bin/prometheus-alertmanager}}
	mkdir -p "$dir/data"
	printf 'route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n' >"$dir/alertmanager.yml"
	etcd_free_port || return 1
	AM_URL="http://127.0.0.1:$ETCD_FREE_PORT"
	"$bin" --config.file="$dir/alertmanager.yml" --storage.path="$dir/data" \
		--web.listen-address="127.0.0.1:$ETCD_FREE_PORT" --cluster.listen-address= --log.level=warn \
		>"$dir/log" 2>&1 3>&- &
	AM_PID=$!
	for ((i = 0; i < 100; i++)); do
		curl -sf "$AM_URL/-/ready" >/dev/null && return 0
		sleep 0.1
	done
	cat "$dir/log" >&2
	echo "monitoring.bash: alertmanager did not get ready at $AM_URL (log: $dir/log)" >&2
	return 1
}

# am_stop: stop the Alertmanager am_start started.
am_stop() {
	[[ -n "${AM_PID:-}" ]] && kill "$AM_PID" 2>/dev/null && wait "$AM_PID" 2>/dev/null
	AM_PID=
	return 0
}

# receiver_start DIR [ARGS...]: tools/receiver on a free loopback port, one JSON
# line per request in DIR/received; sets RECEIVER_URL (no trailing slash),
# RECEIVER_OUT and RECEIVER_PID. ARGS go to the receiver (--status 500, --hang).
# RECEIVER_BIN overrides the binary (default .tools/bin/receiver).
receiver_start() {
	local dir=$1 i bin=${RECEIVER_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.tools/bin/receiver}
	shift
	[[ -x "$bin" ]] || { echo "monitoring.bash: no $bin: run make e2e (it builds tools/receiver)" >&2; return 1; }
	mkdir -p "$dir"
	rm -f "$dir/addr"
	RECEIVER_OUT="$dir/received"
	: >"$RECEIVER_OUT"
	"$bin" --addr-file "$dir/addr" --out "$RECEIVER_OUT" "$@" >"$dir/log" 2>&1 3>&- &
	RECEIVER_PID=$!
	for ((i = 0; i < 100; i++)); do
		if [[ -s "$dir/addr" ]]; then
			RECEIVER_URL="http://$(<"$dir/addr")"
			return 0
		fi
		sleep 0.05
	done
	echo "monitoring.bash: the receiver did not start (log: $dir/log)" >&2
	return 1
}

# receiver_stop: stop the receiver receiver_start started.
receiver_stop() {
	[[ -n "${RECEIVER_PID:-}" ]] && kill "$RECEIVER_PID" 2>/dev/null && wait "$RECEIVER_PID" 2>/dev/null
	RECEIVER_PID=
	return 0
}
