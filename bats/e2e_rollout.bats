#!/usr/bin/env bats
# E2E-1: a rolling reboot of N real daemons against a real 3-member etcd cluster.
# Every node needs a reboot at once; each must reboot exactly once, never two at
# the same time (scripts/e2e-ledger-check on the shared ledger), and every node
# must end up publishing reboot_required false. Nodes are simulated by
# bats/lib/sim.bash and scripts/sim-reboot (docs/e2e.md).

load lib/common
load lib/etcd
load lib/sim

setup() { sim_e2e_setup; }
teardown() {
	rm -f "$TEST_DIR/compacting"
	sim_e2e_teardown
}

# rollout N: N nodes that all need a reboot, started together; waits until each
# completed its reboot, checks the ledger and the published records.
rollout() {
	local n=$1 i nodes=()
	sim_nodes_add "$n"
	for ((i = 1; i <= n; i++)); do nodes+=("n$i"); done
	sim_need_reboot "${nodes[@]}"
	sim_start "${nodes[@]}"
	sim_wait_completed $((10 * n + 20)) "${nodes[@]}"

	run -0 sim_check_ledger --expect "$n"
	assert_output --partial "never more than 1 down at once: OK"
	assert_equal "$(sim_ups)" "$n"
	for i in "${nodes[@]}"; do
		# reboot_completed comes before the record that says so: the node
		# republishes within a publish interval.
		sim_wait_reboot_required_false "$i" 15
		assert_equal "$(sim_reboot_required "$i")" false
		[[ ! -e "$(sim_node_dir "$i")/reboot-required" ]]
		# Exactly one coordinated reboot per node, none started twice.
		assert_equal "$(sim_count_event "$i" reboot_completed)" 1
	done
	# The summary is worth reading in the test log.
	echo "# $(grep '^rollout:' <<<"$output")" >&3
}

@test "E2E-1 3 nodes all need a reboot: all reboot, one at a time" {
	rollout 3
}

@test "E2E-1 5 nodes all need a reboot: all reboot, one at a time" {
	rollout 5
}

# bats test_tags=slow
@test "E2E-1 7 nodes all need a reboot: all reboot, one at a time" {
	rollout 7
}

# compact_forever: compact etcd's history to its current revision, again and
# again, until $TEST_DIR/compacting is removed (docs/runbooks.md's commands);
# one line per compaction in $TEST_DIR/compactions.
compact_forever() {
	local ep=${ETCD_ENDPOINTS%%,*} rev
	touch "$TEST_DIR/compacting"
	while [[ -e "$TEST_DIR/compacting" ]]; do
		rev=$(etcdctl_clean --endpoints "$ep" endpoint status -w json 2>/dev/null |
			grep -o '"revision":[0-9]*' | grep -o '[0-9]*$' | sed -n 1p)
		if [[ -n "$rev" ]] && etcdctl_clean --endpoints "$ep" compact "$rev" >/dev/null 2>&1; then
			echo "$rev" >>"$TEST_DIR/compactions"
		fi
		sleep 0.1
	done
}

# An operator compacts etcd during a rollout, or etcd's auto-compaction runs
# (docs/install.md): here to the current revision several times a second, so
# that watches the nodes start from a revision they just read find it gone.
# Every node still reboots exactly once, one at a time.
@test "E2E-1 5 nodes while etcd compacts its history all the time: all reboot, one at a time" {
	compact_forever 3>&- &
	rollout 5
	rm -f "$TEST_DIR/compacting"
	wait
	local n
	n=$(wc -l <"$TEST_DIR/compactions")
	echo "# $n compactions during the rollout" >&3
	((n >= 20))
}
