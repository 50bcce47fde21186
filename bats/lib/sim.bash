# shellcheck shell=bash
# sim.bash: simulated nodes for the end-to-end suites (bats/e2e_*.bats) and make demo.
#
# A simulated node is a directory with its own configuration, state_dir, run_dir,
# boot id, reboot-required marker and health script, and a real `clusterrebootd run`
# daemon (and its real crd-lock children) talking to a real etcd. Its reboot_command
# is scripts/sim-reboot, which records "NODE down T" in a shared ledger, kills the
# daemon a moment later, "boots" (a new boot id, the marker removed), records
# "NODE up T" and starts the daemon again. See scripts/sim-reboot for the details.
#
#   sim_e2e_setup, sim_e2e_teardown   setup()/teardown() of an e2e suite
#   sim_init                   create $SIM_DIR (default $TEST_DIR/sim) and $SIM_LEDGER;
#                              needs $ETCD_ENDPOINTS
#   sim_node_add NAME [YAML]   create a node (config below); YAML, if given, becomes
#                              its config.d/10-scenario.yaml drop-in. For one node
#                              only: SIM_BIN_DIR=DIR sim_node_add ... runs DIR's
#                              clusterrebootd and crd-lock; SIM_NODE_ENV="VAR=VALUE ..."
#                              exports VAR to its daemon (and children) at every boot;
#                              SIM_GROUP=G puts it in lock group G (its ledger lines
#                              name G)
#   sim_nodes_add N            nodes n1..nN
#   sim_dropin NAME FILE       YAML on stdin -> config.d/FILE.yaml of node NAME
#   sim_need_reboot NAME...    make NAME need a reboot (touch its marker)
#   sim_start NAME...          boot NAME (start its daemon)
#   sim_crash NAME             SIGKILL the daemon and everything it started
#   sim_hup NAME               SIGHUP the daemon (reload its configuration)
#   sim_under_lock NAME SCRIPT run SCRIPT (sh) in the health gate's under-lock phase
#   sim_pre_lock NAME SCRIPT   run SCRIPT (sh) in the health gate's pre-lock phase
#   sim_health_script NAME P   use P as NAME's health_script
#   sim_stop_all               end every node and boot in progress (teardown)
#   sim_downs / sim_ups        how many "down" / "up" lines the ledger has
#   sim_wait_downs N SEC       wait until the ledger has N "down" lines
#   sim_wait_event NAME EVENT SEC [N]   wait until NAME's log has N (default 1)
#                              lines with "event":"EVENT"
#   sim_count_event NAME EVENT how many such lines
#   sim_wait_completed SEC NAME...  wait until each NAME logged reboot_completed
#   sim_diag                   print the ledger and each log's end (failed tests)
#   sim_check_ledger ARGS...   scripts/e2e-ledger-check ARGS... $SIM_LEDGER
#   sim_status NAME            `clusterrebootd status` JSON, as NAME sees it
#   sim_reboot_required NAME   NAME's published reboot_required (true/false)
#   sim_holder_waits_for_slot TTL [CMD ARGS...]   the scene of the holder faults:
#                              n1..n3 with lock_ttl_sec TTL; CMD ARGS (e.g. a proxy
#                              for n1) runs once they exist; n2 reboots and stays
#                              down 14 s, n1 holds the lock waiting for n2's slot,
#                              n3 waits for the lock
#   sim_now                    the Unix time now, with fractions
#   sim_log_time NAME EVENT    the Unix time of NAME's last log line with "event":"EVENT"
#   sim_lock_lost_time NAME    the Unix time NAME's crd-lock child first logged "lock lost"
#   sim_cycle_stop_time NAME   the Unix time NAME's cycle child first stopped under the
#                              lock for losing etcd: "lock lost" (no keepalive answer),
#                              or reason etcd (a request under the lock timed out first)
#   sim_secs A B               B - A in seconds, two decimals
#   sim_node_dir NAME, sim_log NAME
#
# Timings (environment, read by sim_init): SIM_BOOT_SEC (2), SIM_DOWN_DELAY (0.3),
# SIM_LOCK_TTL (5), SIM_HEALTH_TIMEOUT (2), SIM_SLOT_TTL (60).

_sim_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
_sim_repo_root="$(cd "$_sim_lib_dir/../.." && pwd)"
SIM_REBOOT="$_sim_repo_root/scripts/sim-reboot"
SIM_LEDGER_CHECK="$_sim_repo_root/scripts/e2e-ledger-check"

sim_init() {
	: "${ETCD_ENDPOINTS:?sim_init: start etcd first (bats/lib/etcd.bash)}"
	SIM_DIR=${SIM_DIR:-${TEST_DIR:-$BATS_TEST_TMPDIR}/sim}
	SIM_LEDGER="$SIM_DIR/ledger"
	SIM_BIN_DIR=${SIM_BIN_DIR:-${CLUSTERREBOOTD_BIN_DIR:-$_sim_repo_root/bin}}
	SIM_NODES=()
	# A namespace of its own, so that runs sharing an etcd never meet.
	SIM_LOCK_KEY=${SIM_LOCK_KEY:-/e2e-$$-$RANDOM/clusterrebootd/lock}
	mkdir -p "$SIM_DIR/nodes"
	: >"$SIM_LEDGER"
	export SIM_DIR SIM_LEDGER SIM_LOCK_KEY
}

# sim_e2e_setup [single]: for an e2e suite's setup(): common_setup, a 3-member
# etcd cluster (one member with "single"), sim_init.
sim_e2e_setup() {
	common_setup
	# Read by bats/lib/etcd.bash.
	export ETCD_TEST_DIR="$TEST_DIR/etcd"
	if [[ "${1:-}" == single ]]; then etcd_start; else etcd_cluster_start; fi
	sim_init
}

# sim_e2e_teardown: for teardown(): the diagnostics of a failed test, then every
# node and etcd stopped.
sim_e2e_teardown() {
	[[ -z "${BATS_TEST_COMPLETED:-}" ]] && sim_diag
	sim_stop_all
	etcd_stop_all
}

sim_node_dir() { echo "$SIM_DIR/nodes/$1"; }
sim_log() { echo "$SIM_DIR/nodes/$1/daemon.log"; }

# _sim_yaml_list "a,b": ["a", "b"]
_sim_yaml_list() {
	local IFS=, out="" x
	for x in $1; do out+="${out:+, }\"$x\""; done
	echo "[$out]"
}

sim_node_add() {
	local name=$1 d
	d="$(sim_node_dir "$name")"
	mkdir -p "$d/state" "$d/run" "$d/config.d"
	cat /proc/sys/kernel/random/uuid >"$d/boot_id"
	cat >"$d/sim.env" <<-EOF
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		SIM_NODE=$name
		SIM_LEDGER=$SIM_LEDGER
		SIM_BOOT_SEC=${SIM_BOOT_SEC:-2}
		SIM_DOWN_DELAY=${SIM_DOWN_DELAY:-0.3}
		SIM_DAEMON=$SIM_BIN_DIR/clusterrebootd
		SIM_CRD_LOCK=$SIM_BIN_DIR/crd-lock
		SIM_CONFIG=$d/config.yaml
	EOF
	local kv
	[[ -z "${SIM_GROUP:-}" ]] || echo "SIM_GROUP=$SIM_GROUP" >>"$d/sim.env"
	for kv in ${SIM_NODE_ENV:-}; do printf 'export %q\n' "$kv" >>"$d/sim.env"; done
	# The health script: exit 0, unless a scenario installed a phase hook.
	cat >"$d/health.sh" <<-EOF
		#!/bin/sh
		# Simulated node $name: healthy, unless a scenario hook says otherwise.
		if [ -x "$d/hook-\$PHASE" ]; then
			exec "$d/hook-\$PHASE"
		fi
		exit 0
	EOF
	chmod 755 "$d/health.sh"
	cat >"$d/config.yaml" <<-EOF
		node_name: "$name"
		reboot_required_detectors:
		  - type: file
		    path: "$d/reboot-required"
		health_script: "$d/health.sh"
		health_timeout_sec: ${SIM_HEALTH_TIMEOUT:-2}
		health_publish_interval_sec: 1
		check_interval_sec: 1
		backoff_min_sec: 1
		backoff_max_sec: 2
		lock_key: "$SIM_LOCK_KEY"
		lock_ttl_sec: ${SIM_LOCK_TTL:-5}
		max_holders: 1
		etcd_endpoints: $(_sim_yaml_list "$ETCD_ENDPOINTS")
		etcd_dial_timeout_sec: 2
		reboot_command: ["$SIM_REBOOT", "$d"]
		reboot_slot_ttl_sec: ${SIM_SLOT_TTL:-60}
		settle_sec: 0
		max_reboots_per_day: 10
		kill_switch_file: "$d/disable"
		state_dir: "$d/state"
		run_dir: "$d/run"
		metrics:
		  textfile: "$d/metrics.prom"
		windows:
		  timezone: "UTC"
	EOF
	[[ -z "${SIM_GROUP:-}" ]] || echo "group: \"$SIM_GROUP\"" >>"$d/config.yaml"
	if [[ -n "${2:-}" ]]; then
		printf '%s\n' "$2" >"$d/config.d/10-scenario.yaml"
	fi
	SIM_NODES+=("$name")
}

sim_nodes_add() {
	local i
	for ((i = 1; i <= $1; i++)); do sim_node_add "n$i"; done
}

sim_dropin() { cat >"$(sim_node_dir "$1")/config.d/$2.yaml"; }

sim_need_reboot() {
	local n
	for n in "$@"; do touch "$(sim_node_dir "$n")/reboot-required"; done
}

sim_start() {
	local n
	for n in "$@"; do "$SIM_REBOOT" --start "$(sim_node_dir "$n")" || return 1; done
}

sim_crash() { "$SIM_REBOOT" --crash "$(sim_node_dir "$1")"; }

sim_hup() { kill -HUP "$(cat "$(sim_node_dir "$1")/daemon.pid")"; }

sim_health_script() {
	local d
	d="$(sim_node_dir "$1")"
	sed -i "s|^health_script: .*|health_script: \"$2\"|" "$d/config.yaml"
}

# _sim_hook NAME PHASE SCRIPT: SCRIPT runs (sh) when the health gate runs in PHASE.
_sim_hook() {
	local f
	f="$(sim_node_dir "$1")/hook-$2"
	printf '#!/bin/sh\n%s\n' "$3" >"$f.tmp"
	chmod 755 "$f.tmp"
	mv -f "$f.tmp" "$f"
}
sim_under_lock() { _sim_hook "$1" under-lock "$2"; }
sim_pre_lock() { _sim_hook "$1" pre-lock "$2"; }

sim_stop_all() {
	local d
	[[ -n "${SIM_DIR:-}" && -d "$SIM_DIR/nodes" ]] || return 0
	sim_fleetlock_stop_all
	# All at once: each daemon takes a moment to stop its child and exit.
	local pids=()
	for d in "$SIM_DIR"/nodes/*/; do
		[[ -f "$d/sim.env" ]] || continue
		"$SIM_REBOOT" --halt "${d%/}" 3>&- &
		pids+=($!)
	done
	for d in "${pids[@]}"; do wait "$d" || true; done
	return 0
}

sim_downs() { grep -c ' down ' "$SIM_LEDGER" || true; }
sim_ups() { grep -c ' up ' "$SIM_LEDGER" || true; }

# _sim_wait SEC CMD...: poll CMD every 0.2 s until it succeeds; fail after SEC.
_sim_wait() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		if ((SECONDS >= deadline)); then
			echo "sim: timed out: $*" >&2
			return 1
		fi
		sleep 0.2
	done
}

_sim_downs_ge() { (($(sim_downs) >= $1)); }
sim_wait_downs() { _sim_wait "$2" _sim_downs_ge "$1"; }

sim_count_event() {
	grep -c "\"event\":\"$2\"" "$(sim_log "$1")" 2>/dev/null || true
}
_sim_event_ge() { (($(sim_count_event "$1" "$2") >= $3)); }
sim_wait_event() { _sim_wait "$3" _sim_event_ge "$1" "$2" "${4:-1}"; }

# sim_wait_completed SEC NAME...: wait until each NAME completed a coordinated
# reboot (event reboot_completed: back, checked, slot freed).
sim_wait_completed() {
	local sec=$1 n
	shift
	for n in "$@"; do sim_wait_event "$n" reboot_completed "$sec" || return 1; done
}

# sim_diag: the ledger and the end of every node's log (for a failed test).
sim_diag() {
	local d
	[[ -n "${SIM_DIR:-}" && -d "$SIM_DIR/nodes" ]] || return 0
	echo "--- ledger $SIM_LEDGER"
	cat "$SIM_LEDGER"
	for d in "$SIM_DIR"/nodes/*/; do
		echo "--- $(basename "$d"): last lines of ${d}daemon.log"
		tail -n 15 "${d}daemon.log" 2>/dev/null | cut -c1-400
	done
}

sim_check_ledger() { "$SIM_LEDGER_CHECK" "$@" "$SIM_LEDGER"; }

sim_status() {
	"$SIM_BIN_DIR/clusterrebootd" status --config "$(sim_node_dir "$1")/config.yaml" --format json 2>/dev/null
}

sim_reboot_required() {
	sim_status "$1" | jq -r --arg n "$1" '.view.nodes[] | select(.node == $n) | .reboot_required'
}

# sim_wait_reboot_required_false NODE SEC: until NODE's published record says
# it needs no reboot, for SEC seconds at most.
sim_wait_reboot_required_false() {
	local deadline=$((SECONDS + $2))
	until [[ "$(sim_reboot_required "$1")" == false ]]; do
		((SECONDS < deadline)) || return 0
		sleep 0.2
	done
}

sim_holder_waits_for_slot() {
	local ttl=$1
	shift
	SIM_LOCK_TTL=$ttl sim_node_add n1
	SIM_LOCK_TTL=$ttl SIM_BOOT_SEC=14 sim_node_add n2
	SIM_LOCK_TTL=$ttl sim_node_add n3
	if (($#)); then "$@"; fi
	sim_need_reboot n1 n2 n3
	sim_start n2
	sim_wait_downs 1 30
	sim_start n1
	sim_wait_event n1 slot_waiting 20
	sim_start n3
	sim_wait_event n3 lock_waiting 20
	(($(sim_count_event n3 lock_acquired) == 0)) || { echo "sim: n3 got the lock before the fault" >&2; return 1; }
}

sim_now() { date +%s.%N; }

sim_log_time() {
	local t
	t=$(grep "\"event\":\"$2\"" "$(sim_log "$1")" | tail -n 1 | jq -r .ts) || return 1
	[[ -n "$t" && "$t" != null ]] || return 1
	date -d "$t" +%s.%N
}

sim_lock_lost_time() {
	local t
	t=$(grep '"component":"crd-lock"' "$(sim_log "$1")" | grep '"detail":"lock lost"' | sed -n 1p | jq -r .ts)
	[[ -n "$t" && "$t" != null ]] || return 1
	date -d "$t" +%s.%N
}

sim_cycle_stop_time() {
	local t
	t=$(grep '"component":"crd-lock"' "$(sim_log "$1")" | grep '"step":"cycle"' | grep '"event":"blocked"' |
		grep -E '"detail":"lock lost"|"reason":"etcd"' | sed -n 1p | jq -r .ts)
	[[ -n "$t" && "$t" != null ]] || return 1
	date -d "$t" +%s.%N
}

sim_secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# --- Faults (bats/e2e_chaos.bats) -------------------------------------------
#
#   sim_state_tmpfs NAME [SIZE]  NAME's state_dir becomes a tmpfs of SIZE (64k),
#                              mounted and filled to the last byte inside the
#                              daemon's own mount namespace at every boot: the
#                              disk is full when the reboot is due
#   sim_etcd_proxy NAME        NAME reaches each etcd member only through a TCP
#                              forwarder of its own (socat on 127.0.0.1)
#   sim_partition NAME         freeze NAME's forwarders (SIGSTOP): nothing flows
#                              between NAME and etcd in either direction
#   sim_heal NAME              let them run again (SIGCONT)
#   sim_proxy_stop_all         end every forwarder (teardown)

# sim_state_tmpfs NAME [SIZE]: the daemon of NAME starts through a wrapper that
# mounts a tmpfs of SIZE over its state_dir and fills it. The mount lives in the
# namespace of `unshare -m` (scripts/sim-reboot), so it goes away with the node
# and nothing outside sees it; /proc/PID/root shows it from outside.
sim_state_tmpfs() {
	local d size=${2:-64k}
	d="$(sim_node_dir "$1")"
	cat >"$d/daemon-wrap" <<-EOF
		#!/bin/sh
		# Simulated node $1: a full disk under state_dir, then the daemon.
		mount -t tmpfs -o size=$size,mode=0750 crd-e2e-full "$d/state" || exit 97
		dd if=/dev/zero of="$d/state/filler" bs=1k 2>/dev/null
		exec "$SIM_BIN_DIR/clusterrebootd" "\$@"
	EOF
	chmod 755 "$d/daemon-wrap"
	sed -i "s|^SIM_DAEMON=.*|SIM_DAEMON=$d/daemon-wrap|" "$d/sim.env"
}

# sim_etcd_proxy NAME: one forwarder per member of $ETCD_ENDPOINTS on a free
# loopback port, each in a session of its own (its id in NODE_DIR/proxy.sids);
# NAME's etcd_endpoints point at the forwarders. Needs socat.
sim_etcd_proxy() {
	local d ep hostport urls=() sid
	d="$(sim_node_dir "$1")"
	command -v socat >/dev/null || {
		echo "sim_etcd_proxy: socat is missing (scripts/need-apt socat)" >&2
		return 1
	}
	: >"$d/proxy.sids"
	for ep in ${ETCD_ENDPOINTS//,/ }; do
		hostport=${ep#http://}
		etcd_free_port || return 1
		rm -f "$d/proxy.sid"
		# shellcheck disable=SC2016
		setsid -f bash -c 'echo $$ >"$1"; shift; exec "$@"' sim-proxy "$d/proxy.sid" \
			socat "TCP-LISTEN:$ETCD_FREE_PORT,bind=127.0.0.1,reuseaddr,fork" "TCP:$hostport" \
			</dev/null >>"$d/proxy.log" 2>&1 3>&-
		_sim_wait 5 test -s "$d/proxy.sid" || return 1
		sid=$(cat "$d/proxy.sid")
		echo "$sid" >>"$d/proxy.sids"
		_sim_wait 5 _etcd_port_in_use "$ETCD_FREE_PORT" || return 1
		urls+=("http://127.0.0.1:$ETCD_FREE_PORT")
	done
	sed -i "s|^etcd_endpoints: .*|etcd_endpoints: $(_sim_yaml_list "$(IFS=,; echo "${urls[*]}")")|" "$d/config.yaml"
}

# _sim_proxy_signal NAME SIG: SIG to every process of NAME's forwarders.
_sim_proxy_signal() {
	local d sid
	d="$(sim_node_dir "$1")"
	[[ -f "$d/proxy.sids" ]] || return 0
	while read -r sid; do
		[[ "$sid" =~ ^[0-9]+$ ]] && pkill "-$2" -s "$sid" 2>/dev/null
	done <"$d/proxy.sids"
	return 0
}
sim_partition() { _sim_proxy_signal "$1" STOP; }
sim_heal() { _sim_proxy_signal "$1" CONT; }

sim_proxy_stop_all() {
	local d
	[[ -n "${SIM_DIR:-}" && -d "$SIM_DIR/nodes" ]] || return 0
	for d in "$SIM_DIR"/nodes/*/; do
		[[ -f "$d/proxy.sids" ]] || continue
		_sim_proxy_signal "$(basename "$d")" KILL
		rm -f "$d/proxy.sids"
	done
}

# --- The rollout's rules, pipelines and FleetLock ---------------------------
# (bats/e2e_failure_budget.bats, bats/e2e_mixed_fleet.bats)
#
#   sim_no_return NAME...      NAME's next reboots never come back (the ledger
#                              says "NAME lost T"; scripts/sim-reboot's no-return)
#   sim_pipeline_add NAME [YAML]  a node that runs the tools in a loop
#                              (scripts/sim-pipeline), not the daemon
#   sim_fleetlock_server NAME [YAML]  start `crd-lock serve fleetlock` on the
#                              fleet's lock, on a free loopback port; YAML: its
#                              config.d drop-in (max_holders, fleetlock.groups, ...)
#   sim_fleetlock_url NAME     its base URL
#   sim_fleetlock_add NAME GROUP URL...  a FleetLock client (scripts/sim-zincati)
#                              of GROUP asking the servers at URL... (at random),
#                              every SIM_FL_INTERVAL (1) s; it reboots through
#                              scripts/sim-reboot like every node; with
#                              SIM_FL_AGAIN=1 it needs a reboot again after each
#   sim_fleetlock_ask URL OP ID GROUP  one request (OP pre-reboot or
#                              steady-state); prints "STATUS BODY"
#   sim_fleetlock_stop_all     stop every server (sim_stop_all does)
#   sim_ctl NAME ARGS...       clusterrebootd --config NAME's config ARGS
#                              (pause, resume, hold, release-hold), JSON on stdout
#   sim_rollout NAME [FILTER]  the .rollout of NAME's status (as NAME sees it,
#                              in its mount namespace), or FILTER (jq) of it
#   sim_node_downs NAME        how often NAME went down (the ledger)
#   sim_first_down             the node that went down first

sim_no_return() {
	local n
	for n in "$@"; do touch "$(sim_node_dir "$n")/no-return"; done
}

sim_pipeline_add() {
	sim_node_add "$@" || return 1
	echo "SIM_DAEMON=$_sim_repo_root/scripts/sim-pipeline" >>"$(sim_node_dir "$1")/sim.env"
}

# sim_fleetlock_add NAME GROUP URL...: NAME's lock group is GROUP (the ledger
# names it; FleetLock's "default" is the ungrouped fleet), its configuration
# only gives the reboot command.
sim_fleetlock_add() {
	local name=$1 group=$2 d lock_group=$2
	shift 2
	[[ "$group" != default ]] || lock_group=""
	SIM_GROUP=$lock_group sim_node_add "$name" || return 1
	d="$(sim_node_dir "$name")"
	cat >"$d/fleetlock.env" <<-EOF
		FL_ID=$name
		FL_GROUP=$group
		FL_URLS="$*"
		FL_INTERVAL=${SIM_FL_INTERVAL:-1}
		FL_AGAIN=${SIM_FL_AGAIN:-}
	EOF
	echo "SIM_DAEMON=$_sim_repo_root/scripts/sim-zincati" >>"$d/sim.env"
}

sim_fleetlock_url() { cat "$SIM_DIR/servers/$1/url"; }

sim_fleetlock_server() {
	local name=$1 d try pid i rc
	d="$SIM_DIR/servers/$name"
	mkdir -p "$d/config.d"
	cat >"$d/config.yaml" <<-EOF
		node_name: "$name"
		lock_key: "$SIM_LOCK_KEY"
		lock_ttl_sec: ${SIM_LOCK_TTL:-5}
		max_holders: 1
		etcd_endpoints: $(_sim_yaml_list "$ETCD_ENDPOINTS")
		etcd_dial_timeout_sec: 2
		reboot_slot_ttl_sec: ${SIM_SLOT_TTL:-60}
		backoff_min_sec: 1
		backoff_max_sec: 2
	EOF
	[[ -z "${2:-}" ]] || printf '%s\n' "$2" >"$d/config.d/10-scenario.yaml"
	# A port picked at random can be lost to a race: try another.
	for ((try = 0; try < 5; try++)); do
		etcd_free_port || return 1
		rm -f "$d/pid"
		# shellcheck disable=SC2016
		setsid -f bash -c 'echo $$ >"$1"; shift; exec "$@"' sim-fleetlock "$d/pid" \
			"$SIM_BIN_DIR/crd-lock" serve fleetlock --config "$d/config.yaml" --log-format json \
			--listen "127.0.0.1:$ETCD_FREE_PORT" </dev/null >>"$d/server.log" 2>&1 3>&-
		_sim_wait 5 test -s "$d/pid" || return 1
		pid=$(cat "$d/pid")
		for ((i = 0; i < 50; i++)); do
			rc=0
			_sim_serving "$d/server.log" "$pid" "127.0.0.1:$ETCD_FREE_PORT" || rc=$?
			case $rc in
			0)
				echo "http://127.0.0.1:$ETCD_FREE_PORT" >"$d/url"
				return 0
				;;
			2) break ;;
			esac
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	echo "sim_fleetlock_server: $name did not start; see $d/server.log" >&2
	return 1
}

# _sim_serving LOG PID ADDR: 0 when the server logged that it serves on ADDR,
# 2 when PID has exited (lost the port to a race), else 1.
_sim_serving() {
	grep -q "serving FleetLock.*\"listen\":\"$3\"" "$1" 2>/dev/null && return 0
	kill -0 "$2" 2>/dev/null || return 2
	return 1
}

sim_fleetlock_stop_all() {
	local d pid i
	[[ -n "${SIM_DIR:-}" && -d "$SIM_DIR/servers" ]] || return 0
	for d in "$SIM_DIR"/servers/*/; do
		pid=$(cat "$d/pid" 2>/dev/null) || continue
		[[ "$pid" =~ ^[0-9]+$ ]] || continue
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$d/pid"
	done
	return 0
}

sim_fleetlock_ask() {
	local out
	out=$(curl -sS -m 20 -o - -w '\n%{http_code}' -X POST -H 'fleet-lock-protocol: true' \
		-d "{\"client_params\":{\"id\":\"$3\",\"group\":\"$4\"}}" "${1%/}/v1/$2") || return 1
	local body=${out%$'\n'*}
	echo "${out##*$'\n'} ${body%$'\n'}"
}

sim_ctl() {
	local name=$1
	shift
	"$SIM_BIN_DIR/clusterrebootd" --config "$(sim_node_dir "$name")/config.yaml" "$@" --format json
}

# sim_rollout NAME [FILTER]: asked inside NAME's mount namespace while its
# daemon runs, so that status has NAME's boot id and tells NAME's own lock
# seat from another machine's (outside, the seat would count as another).
sim_rollout() {
	local pid cmd=("$SIM_BIN_DIR/clusterrebootd" status --config "$(sim_node_dir "$1")/config.yaml" --format json)
	pid=$(cat "$(sim_node_dir "$1")/daemon.pid" 2>/dev/null) || pid=""
	if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
		cmd=(nsenter --mount --target "$pid" -- "${cmd[@]}")
	fi
	"${cmd[@]}" 2>/dev/null | jq -c ".rollout | ${2:-.}"
}

sim_node_downs() { grep -c "^$1 down " "$SIM_LEDGER" || true; }
sim_first_down() { awk '$2 == "down" { print $1; exit }' "$SIM_LEDGER"; }
