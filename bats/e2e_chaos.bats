#!/usr/bin/env bats
# Faults of the machine and the network (PRD 11.4), with real daemons against a real
# 3-member etcd cluster (bats/lib/sim.bash, docs/e2e.md "Faults"):
#
#   disk full      a node's state_dir is full when its reboot is due: under the lock it
#                  refuses before taking a slot or running a hook (no marker, reason
#                  reboot_failed), says so, keeps running and frees the lock; the others
#                  reboot
#   member loss    1 of 3 etcd members stops mid-rollout: the rollout completes, serially
#   quorum loss    2 of 3 stop mid-rollout: nobody else goes down; members back, the
#                  rollout completes, nothing stuck
#   partition      the lock holder loses etcd while it holds the lock: its lease runs
#                  out, it stops acting under the lock, the next node takes the lock only
#                  after that, and nobody reboots on top of anyone

load lib/common
load lib/etcd
load lib/sim

setup() { sim_e2e_setup; }
teardown() {
	# Frozen forwarders first: a stopped process keeps its node's teardown waiting.
	sim_proxy_stop_all
	sim_e2e_teardown
}

# all_done NAME...: every NAME completed exactly one reboot and publishes
# reboot_required false; the ledger has no overlap.
all_done() {
	local n
	run -0 sim_check_ledger --expect "$#"
	assert_output --partial "never more than 1 down at once: OK"
	for n in "$@"; do
		assert_equal "$(sim_count_event "$n" reboot_completed)" 1
		sim_wait_reboot_required_false "$n" 15
		assert_equal "$(sim_reboot_required "$n")" false
	done
	echo "# $(grep '^rollout:' <<<"$output")" >&3
}

@test "chaos disk full: the node cannot write its marker, refuses before the slot, keeps running, frees the lock" {
	local d pid
	sim_nodes_add 3
	sim_state_tmpfs n1 64k
	d="$(sim_node_dir n1)"
	sim_need_reboot n1 n2 n3
	# n1 alone first: it gets the lock, then finds it could not write the marker,
	# before it takes a slot or runs a hook.
	sim_start n1
	_refused() { grep -q 'cannot take the reboot marker' "$(sim_log n1)"; }
	_sim_wait 30 _refused
	pid=$(cat "$d/daemon.pid")
	# The state_dir the daemon sees is the tmpfs, full to the last block.
	run -0 stat -f -c '%T %a' "/proc/$pid/root$d/state"
	assert_output "tmpfs 0"
	# It said why, with the exit code's name, took no slot and gave the lock back.
	run -0 grep -F '"reason":"reboot_failed"' "$(sim_log n1)"
	run -0 grep -F 'no space left on device' "$(sim_log n1)"
	assert_equal "$(sim_count_event n1 slot_taken)" 0
	sim_wait_event n1 lock_released 5
	assert_equal "$(sim_downs)" 0
	[[ ! -e "/proc/$pid/root$d/state/reboot-marker.json" ]] || fail "n1 wrote a marker on a full disk"

	# The others go through while n1 keeps retrying: a slot or seat n1 kept would
	# hold them until reboot_slot_ttl_sec (60 s) ran out.
	sim_start n2 n3
	sim_wait_completed 45 n2 n3
	run -0 sim_check_ledger --expect 2
	assert_output --partial "never more than 1 down at once: OK"
	refute grep -q '^n1 ' "$SIM_LEDGER"

	# n1 is still the same running daemon, still asking for its reboot.
	kill -0 "$pid" || fail "n1's daemon exited"
	assert_equal "$(cat "$d/daemon.pid")" "$pid"
	(($(grep -c 'cannot take the reboot marker' "$(sim_log n1)") >= 1))
	assert_equal "$(sim_count_event n1 slot_taken)" 0
	assert_equal "$(sim_reboot_required n1)" true
}

@test "chaos etcd member loss: 1 of 3 members stops mid-rollout, the rollout completes serially" {
	sim_nodes_add 3
	sim_need_reboot n1 n2 n3
	sim_start n1 n2 n3
	sim_wait_downs 1 30
	# Member 1 is every node's first endpoint (and maybe the leader).
	etcd_member_stop 1
	sim_wait_completed 60 n1 n2 n3
	all_done n1 n2 n3
}

# leader_index: the 1-based member index of the current etcd leader.
leader_index() {
	local i=1 ep
	for ep in ${ETCD_ENDPOINTS//,/ }; do
		if etcdctl_clean --endpoints "$ep" endpoint status -w json 2>/dev/null |
			jq -e '.[0].Status | .leader == .header.member_id' >/dev/null; then
			echo "$i"
			return 0
		fi
		i=$((i + 1))
	done
	return 1
}

@test "chaos etcd leader loss while a node holds the lock and another waits: no overlap, the rollout completes" {
	local n leader
	SIM_HEALTH_TIMEOUT=6 SIM_LOCK_TTL=10 sim_nodes_add 3
	# The under-lock health check takes 3 s, so the holder is under the lock
	# (and the others wait) when the leader goes.
	for n in n1 n2 n3; do sim_under_lock "$n" "sleep 3; exit 0"; done
	sim_need_reboot n1 n2 n3
	sim_start n1
	sim_wait_event n1 lock_acquired 20
	sim_start n2 n3
	sim_wait_event n2 lock_waiting 20
	leader=$(leader_index) || fail "no etcd member says it is the leader"
	etcd_member_stop "$leader"
	sim_wait_completed 90 n1 n2 n3
	all_done n1 n2 n3
	echo "# stopped the leader, member $leader" >&3
}

@test "chaos etcd quorum loss: 2 of 3 members die mid-rollout, nobody else goes down; back, the rollout completes" {
	local ttl=5 i
	SIM_LOCK_TTL=$ttl sim_nodes_add 3
	sim_need_reboot n1 n2 n3
	sim_start n1 n2 n3
	sim_wait_downs 1 30
	etcd_member_kill 2
	etcd_member_kill 3
	# Longer than a lock lease and the first node's boot: whatever could go wrong
	# without a quorum had the time to.
	for ((i = 0; i < 3 * ttl; i++)); do
		assert_equal "$(sim_downs)" 1
		sleep 1
	done
	assert_equal "$(sim_ups)" 1
	etcd_member_start 2
	etcd_member_start 3
	sim_wait_completed 60 n1 n2 n3
	all_done n1 n2 n3
}

@test "chaos partition: the lock holder loses etcd under the lock; its lease runs out, it stops, the next goes only after" {
	local ttl=6 t_part t_acq waited
	# n2 reboots first and stays down 14 s; n1 holds the lock meanwhile, waiting
	# under it for n2's slot; n3 queues behind n1. n1 reaches etcd only through
	# forwarders of its own, which are then frozen.
	command -v socat >/dev/null || "$REPO_ROOT/scripts/need-apt" socat
	sim_holder_waits_for_slot "$ttl" sim_etcd_proxy n1

	sim_partition n1
	t_part=$(sim_now)
	# n3 gets the lock once n1's lease has expired on the server: between 2/3 TTL
	# (keepalives every TTL/3) and TTL after the partition.
	sim_wait_event n3 lock_acquired $((ttl + 15))
	t_acq=$(sim_log_time n3 lock_acquired)
	waited=$(sim_secs "$t_part" "$t_acq")
	echo "# n3 took the lock ${waited} s after n1 was cut off (lock_ttl_sec $ttl)" >&3
	awk -v w="$waited" -v ttl="$ttl" 'BEGIN { exit !(w >= ttl * 2 / 3 - 0.3) }' ||
		fail "n3 took the lock ${waited} s after the partition, before n1's lease could have expired"
	awk -v w="$waited" -v ttl="$ttl" 'BEGIN { exit !(w <= ttl + 8) }' ||
		fail "n3 took the lock only ${waited} s after the partition: n1's expired lease was not noticed"
	# n1 noticed on its own that etcd was gone and stopped acting under the lock,
	# by the time n3 had the lock: its crd-lock child gives up after 2/3 TTL
	# without a keepalive answer ("lock lost"), or sooner when a request it makes
	# under the lock (the admission, woken by n3 queueing) times out first
	# (reason etcd). Which comes first is a race of the partition's moment.
	_lost() { sim_cycle_stop_time n1 >/dev/null; }
	_sim_wait 15 _lost
	local t_lost how
	t_lost=$(sim_cycle_stop_time n1)
	how=$(grep '"component":"crd-lock"' "$(sim_log n1)" | grep '"step":"cycle"' | grep '"event":"blocked"' |
		grep -E '"detail":"lock lost"|"reason":"etcd"' | sed -n 1p | jq -r 'if .detail == "lock lost" then .detail else "reason " + .reason end')
	echo "# n1 gave up the lock $(sim_secs "$t_part" "$t_lost") s after the partition ($how)" >&3
	awk -v l="$t_lost" -v a="$t_acq" 'BEGIN { exit !(l <= a + 0.5) }' ||
		fail "n1 still acted under the lock $(sim_secs "$t_acq" "$t_lost") s after n3 took it"

	# n2 comes back and frees its slot; n3 reboots; n1, cut off, never does.
	sim_wait_downs 2 40
	run -0 awk '$2 == "down" { print $1 }' "$SIM_LEDGER"
	assert_output $'n2\nn3'

	# Healed, n1 catches up; nobody was ever down together.
	sim_heal n1
	sim_wait_completed 60 n1 n2 n3
	all_done n1 n2 n3
}
