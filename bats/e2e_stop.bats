#!/usr/bin/env bats
# Stopping a running rollout: the kill switch file and the cluster-wide pause key
# (clusterrebootd pause) stop it within one cycle (no further node goes down), and
# removing the file or `clusterrebootd resume` lets it continue. Real daemons, a
# real 3-member etcd cluster (bats/lib/sim.bash, docs/e2e.md).

load lib/common
load lib/etcd
load lib/sim

setup() { sim_e2e_setup; }
teardown() { sim_e2e_teardown; }

# first_down_then STOP_CMD: 3 nodes need a reboot; as soon as the first is down,
# run STOP_CMD; sets FIRST to the node that went down.
first_down_then() {
	sim_nodes_add 3
	sim_need_reboot n1 n2 n3
	sim_start n1 n2 n3
	sim_wait_downs 1 30
	"$@"
	FIRST=$(awk '$2 == "down" { print $1; exit }' "$SIM_LEDGER")
}

# others_of NODE: the two other nodes.
others_of() {
	local n
	for n in n1 n2 n3; do [[ $n == "$1" ]] || echo "$n"; done
}

kill_switch_on() {
	local n
	for n in n1 n2 n3; do touch "$(sim_node_dir "$n")/disable"; done
}

@test "the kill switch file stops a running rollout within one cycle; removing it continues" {
	first_down_then kill_switch_on
	local others
	mapfile -t others < <(others_of "$FIRST")
	# The node already rebooting comes back and completes (post-reboot checks come
	# before the kill switch); the others say kill_switch within a cycle or two.
	sim_wait_completed 20 "$FIRST"
	for n in "${others[@]}"; do
		_sim_wait 4 grep -q '"reason":"kill_switch"' "$(sim_log "$n")"
	done
	# Without the switch the next node would be down within a second or two.
	sleep 4
	assert_equal "$(sim_downs)" 1

	rm -f "$(sim_node_dir n1)/disable" "$(sim_node_dir n2)/disable" "$(sim_node_dir n3)/disable"
	sim_wait_completed 40 "${others[@]}"
	run -0 sim_check_ledger --expect 3
	assert_output --partial "never more than 1 down at once: OK"
}

pause_cluster() {
	"$SIM_BIN_DIR/clusterrebootd" pause --config "$(sim_node_dir n1)/config.yaml" --reason "e2e: change freeze" --format json >"$TEST_DIR/pause.json"
}

@test "clusterrebootd pause stops a running rollout within one cycle; resume continues it" {
	first_down_then pause_cluster
	run -0 jq -r .paused.reason "$TEST_DIR/pause.json"
	assert_output "e2e: change freeze"
	local others
	mapfile -t others < <(others_of "$FIRST")
	sim_wait_completed 20 "$FIRST"
	for n in "${others[@]}"; do
		_sim_wait 5 grep -q '"reason":"paused"' "$(sim_log "$n")"
	done
	sleep 4
	assert_equal "$(sim_downs)" 1
	run -0 bash -c "'$SIM_BIN_DIR/clusterrebootd' status --config '$(sim_node_dir n2)/config.yaml' --format json 2>/dev/null"
	assert_equal "$(json_field .view.paused.reason)" "e2e: change freeze"

	run -0 "$SIM_BIN_DIR/clusterrebootd" resume --config "$(sim_node_dir n2)/config.yaml" --format json
	sim_wait_completed 40 "${others[@]}"
	run -0 sim_check_ledger --expect 3
	assert_output --partial "never more than 1 down at once: OK"
}
