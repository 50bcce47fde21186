#!/usr/bin/env bats
# High latency between nodes and etcd (PRD 11.4), with real daemons against a real
# 3-member etcd cluster (bats/lib/sim.bash, docs/e2e.md "Faults"). The kernel has no
# netem: each node reaches etcd through tools/slowproxy, which holds every chunk
# each way for a delay that a test can change while the node runs
# (bats/lib/latency.bash).
#
#   moderate   200 ms ± 50 ms each way for every node from the start (etcd_dial_timeout_sec
#              5, the default): the rollout completes, serially, one reboot each
#   too slow   3 s each way for one node, above every etcd timeout (etcd_dial_timeout_sec
#              2): that node reports etcd_unavailable cycle after cycle and never goes
#              down; its daemon keeps running; the others complete; latency removed,
#              it catches up
#   raised     (slow) 0 -> 3 s each way on the lock holder mid-rollout: it declares the
#              lock lost, the next node takes it only after, nobody is down together;
#              back to 0, the holder catches up

load lib/common
load lib/etcd
load lib/sim
load lib/latency

setup() { sim_e2e_setup; }
teardown() {
	latency_stop_all
	sim_e2e_teardown
}

# reboot_required NAME: NAME's published reboot_required, read from etcd directly
# (`clusterrebootd status` with n1's configuration but the members' own
# endpoints): a status through a slow proxy may itself time out.
reboot_required() {
	local direct="$SIM_DIR/direct.yaml"
	sed "s|^etcd_endpoints: .*|etcd_endpoints: $(_sim_yaml_list "$ETCD_ENDPOINTS")|" \
		"$(sim_node_dir n1)/config.yaml" >"$direct"
	"$SIM_BIN_DIR/clusterrebootd" status --config "$direct" --format json 2>/dev/null |
		jq -r --arg n "$1" '.view.nodes[] | select(.node == $n) | .reboot_required'
}

# all_done NAME...: every NAME completed exactly one reboot and publishes
# reboot_required false; the ledger has no overlap. Through a slow link a
# node's record can be missing for a moment (its lease ran out before the
# slow publication renewed it; the next one grants a new lease), so each
# record gets up to 20 s to read false.
all_done() {
	local n
	run -0 sim_check_ledger --expect "$#"
	assert_output --partial "never more than 1 down at once: OK"
	for n in "$@"; do
		assert_equal "$(sim_count_event "$n" reboot_completed)" 1
		_publishes_false() { [[ "$(reboot_required "$1")" == false ]]; }
		_sim_wait 20 _publishes_false "$n"
	done
	echo "# $(grep '^rollout:' <<<"$output")" >&3
}

# etcd_blocked NAME: how many of NAME's cycles were blocked because etcd could not
# be reached in time (the daemon's metrics textfile, written after every cycle; its
# log folds repeated identical cycle lines into one).
etcd_blocked() { metric "$1" 'clusterrebootd_reboot_blocked_total{reason="etcd"}'; }

# metric NAME SERIES: the value of SERIES in NAME's metrics textfile (0 if absent).
metric() {
	local f
	f="$(sim_node_dir "$1")/metrics.prom"
	[[ -f "$f" ]] || { echo 0; return; }
	awk -v s="$2" '$1 == s { v = $2 } END { print v + 0 }' "$f"
}

@test "latency moderate: 200 ms each way for every node, the rollout completes serially" {
	local n
	sim_nodes_add 3
	# A new connection costs about four round trips before its first answer
	# (measured ~2 s at 200 ms each way): the product's default
	# etcd_dial_timeout_sec, 5, not the simulation's 2, leaves room for that.
	for n in n1 n2 n3; do
		latency_proxy "$n" 200ms 50ms
		echo 'etcd_dial_timeout_sec: 5' | sim_dropin "$n" 20-latency
	done
	sim_need_reboot n1 n2 n3
	sim_start n1 n2 n3
	sim_wait_completed 90 n1 n2 n3
	all_done n1 n2 n3
}

@test "latency too slow: one node at 3 s each way reports etcd timeouts, keeps running, never reboots; removed, it catches up" {
	local d pid blocked
	# 3 s each way is a round trip of at least 6 s: every request n1 makes
	# outlives etcd_dial_timeout_sec (2 s). A busy machine only adds to that.
	sim_nodes_add 3
	latency_proxy n1 3s
	d="$(sim_node_dir n1)"
	sim_need_reboot n1 n2 n3
	sim_start n1 n2 n3
	pid=$(cat "$d/daemon.pid")
	sim_wait_completed 60 n2 n3

	# The lock has been free since n3 completed. n1 keeps trying, cycle after
	# cycle, and each time its crd-lock child times out before it gets anywhere.
	blocked=$(etcd_blocked n1)
	_more_blocked() { (($(etcd_blocked n1) >= blocked + 3)); }
	_sim_wait 30 _more_blocked
	refute grep -q '^n1 ' "$SIM_LEDGER"
	assert_equal "$(sim_count_event n1 lock_acquired)" 0
	# It says why: the child's etcd_unavailable names the timeout and what to
	# check; the daemon's cycle ends with reason etcd (exit code 7).
	run -0 grep '"component":"crd-lock"' "$(sim_log n1)"
	run -0 grep '"event":"etcd_unavailable"' <<<"$output"
	assert_output --partial 'etcd: timeout at http://127.0.0.1:'
	assert_output --partial 'etcd_dial_timeout_sec'
	run -0 grep '"event":"cycle"' "$(sim_log n1)"
	assert_output --partial '"reason":"etcd"'
	refute_output --partial '"action":"rebooting"'
	# Still the same daemon, not crashed and restarted.
	kill -0 "$pid" || fail "n1's daemon exited"
	assert_equal "$(cat "$d/daemon.pid")" "$pid"
	assert_equal "$(sim_count_event n1 started)" 1

	# The latency goes away: n1 catches up; nobody was ever down together.
	latency_set n1 0s
	sim_wait_completed 60 n1
	all_done n1 n2 n3
}

# bats test_tags=slow
@test "latency raised on the lock holder: it gives the lock up, the next takes it only after; nobody reboots on top" {
	local ttl=6 t_raise t_acq t_lost
	# n2 reboots first and stays down 14 s; n1 holds the lock meanwhile, waiting
	# under it for n2's slot; n3 queues behind n1. Then n1's latency goes from 0 to
	# 3 s each way: its keepalive answers come back too late (a round trip of 6 s
	# against 2/3 of lock_ttl_sec, 4 s).
	sim_holder_waits_for_slot "$ttl" latency_proxy n1 0s

	latency_set n1 3s
	t_raise=$(sim_now)
	# n1's crd-lock child declares the lock lost (no keepalive answer for 2/3 TTL)
	# and stops acting under it ...
	_lost() { grep '"component":"crd-lock"' "$(sim_log n1)" | grep '"detail":"lock lost"' >/dev/null; }
	_sim_wait $((ttl + 10)) _lost
	t_lost=$(sim_lock_lost_time n1)
	echo "# n1 gave up the lock $(sim_secs "$t_raise" "$t_lost") s after its latency went to 3 s" >&3
	# ... before n3 gets it: what n1 sends (its last renewals, then the revoke of
	# its lease) still reaches etcd, 3 s late, so its seat outlives its giving up.
	sim_wait_event n3 lock_acquired $((2 * ttl + 15))
	t_acq=$(sim_log_time n3 lock_acquired)
	echo "# n3 took the lock $(sim_secs "$t_raise" "$t_acq") s after the raise" >&3
	awk -v l="$t_lost" -v a="$t_acq" 'BEGIN { exit !(l <= a) }' ||
		fail "n1 still acted under the lock $(sim_secs "$t_acq" "$t_lost") s after n3 took it"

	# n2 comes back and frees its slot; n3 reboots; n1, too slow, never does and
	# says why (etcd_unavailable: its requests time out).
	sim_wait_downs 2 40
	run -0 awk '$2 == "down" { print $1 }' "$SIM_LEDGER"
	assert_output $'n2\nn3'
	sim_wait_event n1 etcd_unavailable 20
	assert_equal "$(sim_count_event n1 started)" 1

	# Back to normal, n1 catches up; nobody was ever down together.
	latency_set n1 0s
	sim_wait_completed 60 n1 n2 n3
	all_done n1 n2 n3
}
