# shellcheck shell=bash
# etcd.bash: throwaway etcd servers on loopback for shell tests.
#
# Source it (bats: `load lib/etcd`) and call
#
#   etcd_start [BIN]          one member; exports ETCD_ENDPOINT and ETCD_ENDPOINTS
#   etcd_cluster_start [BIN]  three members on 127.0.0.1; exports ETCD_ENDPOINTS
#                             (comma-separated client URLs) and ETCD_ENDPOINT (member 1)
#   etcd_member_stop N        SIGTERM member N (1-based) and wait for it
#   etcd_member_kill N        SIGKILL member N
#   etcd_member_start N       start member N again on its old ports and data
#   etcd_wait_healthy URL...  wait until every URL answers /health with "true"
#   etcd_stop_all             stop every member this shell started and remove its data
#
# BIN defaults to $ETCD_TEST_BIN, then .tools/bin/etcd (make etcd), then etcd on PATH;
# /usr/bin/etcd (make etcd-debian) gives the older server. Each member listens on
# free ports picked from 10000-32767 (below the kernel's ephemeral range), bind-tested
# by starting the server itself: a member that fails to bind is started again on
# other ports. Data and logs live in $ETCD_TEST_DIR (default: a new directory under
# $BATS_TEST_TMPDIR or TMPDIR), the log of member N in $ETCD_TEST_DIR/mN.log.
#
# Clean-up: in bats call etcd_stop_all from teardown (or teardown_file). Outside
# bats, sourcing sets an EXIT trap that does it. Run as a program,
#
#   bash bats/lib/etcd.bash [single|cluster] [BIN]
#
# prints the endpoints (ETCD_ENDPOINTS=...) and keeps the servers up until it gets
# SIGINT or SIGTERM.
#
# The server and etcdctl read ETCD_*/ETCDCTL_* variables as flags, so every member
# starts with those removed from its environment.

_etcd_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
_etcd_repo_root="$(cd "$_etcd_lib_dir/../.." && pwd)"

# Bookkeeping per member index (1-based).
_etcd_pids=()
_etcd_names=()
_etcd_client_ports=()
_etcd_peer_ports=()
_etcd_bins=()
_etcd_cluster_spec=""
_etcd_ports_taken=" "

# etcd_bin prints the server binary to use.
etcd_bin() {
	if [[ -n "${1:-}" ]]; then
		echo "$1"
	elif [[ -n "${ETCD_TEST_BIN:-}" ]]; then
		echo "$ETCD_TEST_BIN"
	elif [[ -x "$_etcd_repo_root/.tools/bin/etcd" ]]; then
		echo "$_etcd_repo_root/.tools/bin/etcd"
	elif command -v etcd >/dev/null; then
		command -v etcd
	else
		echo "etcd.bash: no etcd binary; run 'make etcd' (or 'make etcd-debian')" >&2
		return 1
	fi
}

# _etcd_env_args: set _etcd_unset to env(1) arguments that remove every
# ETCD_*/ETCDCTL_* variable (the server and etcdctl read them as flags).
_etcd_env_args() {
	local v
	_etcd_unset=()
	for v in $(compgen -e); do
		case "$v" in ETCD_* | ETCDCTL_*) _etcd_unset+=(-u "$v") ;; esac
	done
}

# etcdctl_clean ARGS...: run etcdctl ($ETCDCTL_TEST_BIN, .tools/bin/etcdctl or PATH)
# without ETCD_*/ETCDCTL_* variables around.
etcdctl_clean() {
	local bin=${ETCDCTL_TEST_BIN:-}
	if [[ -z "$bin" ]]; then
		if [[ -x "$_etcd_repo_root/.tools/bin/etcdctl" ]]; then bin="$_etcd_repo_root/.tools/bin/etcdctl"; else bin=etcdctl; fi
	fi
	_etcd_env_args
	env "${_etcd_unset[@]}" "$bin" "$@"
}

# _etcd_port_in_use PORT: something listens on PORT (ss), or accepts a
# connection on 127.0.0.1:PORT. (TIME_WAIT leftovers do not stop a listener.)
_etcd_port_in_use() {
	local port=$1
	if command -v ss >/dev/null; then
		[[ -n "$(ss -Hltn "( sport = :$port )" 2>/dev/null)" ]] && return 0
	fi
	(exec 9<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
}

# etcd_free_port: set ETCD_FREE_PORT to a loopback port that nothing uses and
# this shell has not handed out before (not in a subshell: it remembers what it
# handed out). The caller still has to survive losing a race for it.
etcd_free_port() {
	local port i
	for ((i = 0; i < 200; i++)); do
		port=$((10000 + (RANDOM * 32768 + RANDOM) % 22768))
		[[ "$_etcd_ports_taken" == *" $port "* ]] && continue
		_etcd_port_in_use "$port" && continue
		_etcd_ports_taken+="$port "
		ETCD_FREE_PORT=$port
		return 0
	done
	echo "etcd.bash: found no free port in 10000-32767" >&2
	return 1
}

# _etcd_healthy URL: GET URL/health answers {"health":"true",...}. Plain bash
# /dev/tcp, so neither curl nor etcdctl is needed.
_etcd_healthy() {
	local hostport=${1#http://}
	hostport=${hostport%%/*}
	local host=${hostport%:*} port=${hostport##*:}
	timeout 2 bash -c '
		exec 9<>"/dev/tcp/$1/$2" || exit 1
		printf "GET /health HTTP/1.0\r\nHost: %s\r\n\r\n" "$1" >&9
		grep -q "\"health\":\"true\"" <&9
	' _ "$host" "$port" 2>/dev/null
}

# etcd_wait_healthy URL...: wait up to ETCD_TEST_START_TIMEOUT seconds (default 30)
# until every URL is healthy. Fails early when a member of this shell has exited.
etcd_wait_healthy() {
	local deadline=$((SECONDS + ${ETCD_TEST_START_TIMEOUT:-30}))
	local url n pending
	while :; do
		pending=0
		for url in "$@"; do
			_etcd_healthy "$url" || pending=1
		done
		((pending == 0)) && return 0
		for n in "${!_etcd_pids[@]}"; do
			if [[ -n "${_etcd_pids[n]}" ]] && ! kill -0 "${_etcd_pids[n]}" 2>/dev/null; then
				return 2
			fi
		done
		if ((SECONDS >= deadline)); then
			echo "etcd.bash: not healthy after ${ETCD_TEST_START_TIMEOUT:-30}s: $*" >&2
			return 1
		fi
		sleep 0.1
	done
}

_etcd_ensure_dir() {
	if [[ -z "${ETCD_TEST_DIR:-}" ]]; then
		ETCD_TEST_DIR="$(mktemp -d "${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/etcd.XXXXXX")"
	fi
	mkdir -p "$ETCD_TEST_DIR"
}

# _etcd_launch N STATE: start member N with its recorded name, ports and binary.
# STATE is new or existing (--initial-cluster-state).
_etcd_launch() {
	local n=$1 state=$2 dir=$ETCD_TEST_DIR
	local name=${_etcd_names[n]} cport=${_etcd_client_ports[n]} pport=${_etcd_peer_ports[n]}
	local client="http://127.0.0.1:$cport" peer="http://127.0.0.1:$pport"
	# env execs the server, so $! is the server itself. fd 3 is bats' output
	# channel: a child holding it would make bats wait forever.
	_etcd_env_args
	env "${_etcd_unset[@]}" "${_etcd_bins[n]}" \
		--name "$name" \
		--data-dir "$dir/$name.etcd" \
		--listen-client-urls "$client" --advertise-client-urls "$client" \
		--listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
		--initial-cluster "$_etcd_cluster_spec" \
		--initial-cluster-token "etcd-test-$$" \
		--initial-cluster-state "$state" \
		</dev/null >>"$dir/$name.log" 2>&1 3>&- &
	_etcd_pids[n]=$!
	# Not a job of this shell: no "Killed" notice when a test SIGKILLs it.
	disown "$!"
}

_etcd_export() {
	local n urls=()
	for n in "${!_etcd_client_ports[@]}"; do
		urls+=("http://127.0.0.1:${_etcd_client_ports[n]}")
	done
	ETCD_ENDPOINTS="$(IFS=,; echo "${urls[*]}")"
	ETCD_ENDPOINT="${urls[0]}"
	export ETCD_ENDPOINTS ETCD_ENDPOINT ETCD_TEST_DIR
}

# _etcd_start_members COUNT BIN: start COUNT fresh members (indexes 1..COUNT),
# retrying on new ports when one of them could not come up.
_etcd_start_members() {
	local count=$1 bin=$2 attempt n rc urls spec
	_etcd_ensure_dir || return 1
	for ((attempt = 1; attempt <= 5; attempt++)); do
		spec="" urls=()
		for ((n = 1; n <= count; n++)); do
			_etcd_names[n]="m$n"
			_etcd_bins[n]=$bin
			etcd_free_port || return 1
			_etcd_client_ports[n]=$ETCD_FREE_PORT
			etcd_free_port || return 1
			_etcd_peer_ports[n]=$ETCD_FREE_PORT
			spec+="${spec:+,}m$n=http://127.0.0.1:${_etcd_peer_ports[n]}"
			urls+=("http://127.0.0.1:${_etcd_client_ports[n]}")
		done
		_etcd_cluster_spec=$spec
		for ((n = 1; n <= count; n++)); do
			rm -rf "$ETCD_TEST_DIR/m$n.etcd"
			_etcd_launch "$n" new
		done
		rc=0
		etcd_wait_healthy "${urls[@]}" || rc=$?
		if ((rc == 0)); then
			_etcd_export
			return 0
		fi
		# A member died (most likely lost a port race) or never got healthy:
		# stop all, keep the logs, try other ports.
		for ((n = 1; n <= count; n++)); do
			_etcd_signal "$n" KILL
			[[ -f "$ETCD_TEST_DIR/m$n.log" ]] && mv -f "$ETCD_TEST_DIR/m$n.log" "$ETCD_TEST_DIR/m$n.log.attempt$attempt"
		done
		((rc == 1)) && break
	done
	echo "etcd.bash: could not start $count member(s) of $bin; logs in $ETCD_TEST_DIR" >&2
	return 1
}

# etcd_start [BIN]: one member.
etcd_start() {
	local bin
	bin="$(etcd_bin "${1:-}")" || return 1
	_etcd_start_members 1 "$bin"
}

# etcd_cluster_start [BIN]: three members.
etcd_cluster_start() {
	local bin
	bin="$(etcd_bin "${1:-}")" || return 1
	_etcd_start_members 3 "$bin"
}

# _etcd_signal N SIG: send SIG to member N and wait until it is gone (SIGKILL
# after 10 s). Works also where the member is not a child of this shell.
_etcd_signal() {
	local n=$1 sig=$2 pid=${_etcd_pids[$1]:-} i
	[[ -z "$pid" ]] && return 0
	kill -s "$sig" "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -s KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	_etcd_pids[n]=""
}

# etcd_member_stop N: graceful stop of member N.
etcd_member_stop() { _etcd_signal "$1" TERM; }

# etcd_member_kill N: SIGKILL member N (a crash).
etcd_member_kill() { _etcd_signal "$1" KILL; }

# etcd_member_start N: start a stopped member again with its data and ports and
# wait until it is healthy.
etcd_member_start() {
	local n=$1
	if [[ -n "${_etcd_pids[n]:-}" ]]; then
		echo "etcd.bash: member $n is running" >&2
		return 1
	fi
	_etcd_launch "$n" existing
	etcd_wait_healthy "http://127.0.0.1:${_etcd_client_ports[n]}"
}

# etcd_stop_all: stop every member and remove the data directories (logs stay
# while the directory belongs to bats, which removes it itself).
etcd_stop_all() {
	local n
	# One by one: stopped all at once, a leader waits for its transfer to
	# followers that are going away too (measured: 7 s against 2 s).
	for n in "${!_etcd_pids[@]}"; do
		_etcd_signal "$n" TERM
	done
	if [[ -n "${ETCD_TEST_DIR:-}" ]]; then
		rm -rf "$ETCD_TEST_DIR"/*.etcd
		if [[ -z "${BATS_TEST_TMPDIR:-}" ]]; then
			rm -rf "$ETCD_TEST_DIR"
		fi
	fi
	_etcd_pids=() _etcd_names=() _etcd_client_ports=() _etcd_peer_ports=() _etcd_bins=()
	_etcd_ports_taken=" "
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	# Run as a program: start, print, wait for a signal, stop.
	set -eu
	_etcd_sleeper=""
	trap '[[ -n "$_etcd_sleeper" ]] && kill "$_etcd_sleeper" 2>/dev/null; etcd_stop_all' EXIT
	trap "exit 0" INT TERM
	case "${1:-single}" in
	single) etcd_start "${2:-}" ;;
	cluster) etcd_cluster_start "${2:-}" ;;
	*)
		echo "usage: $0 [single|cluster] [BIN]" >&2
		exit 2
		;;
	esac
	echo "ETCD_ENDPOINTS=$ETCD_ENDPOINTS"
	echo "ETCD_TEST_DIR=$ETCD_TEST_DIR"
	sleep infinity 3>&- &
	_etcd_sleeper=$!
	wait "$_etcd_sleeper"
elif [[ -z "${BATS_VERSION:-}" ]]; then
	trap etcd_stop_all EXIT
fi
