#!/usr/bin/env bats
# A node that never comes back from its reboot (bats/lib/sim.bash, docs/e2e.md):
# its reboot slot keeps the others waiting until the slot's lease runs out
# (reboot_slot_ttl_sec, at least 60 s), then the rollout continues without it.
# That is the slot's lease alone, with the failure budget turned off
# (rollout.max_failures 0); with the default budget the expired slot halts
# the fleet instead (bats/e2e_failure_budget.bats). Slow (over a minute):
# tagged slow.

load lib/common
load lib/etcd
load lib/sim

setup() { sim_e2e_setup; }
teardown() { sim_e2e_teardown; }

# bats test_tags=slow
@test "a node that never comes back: its slot expires after reboot_slot_ttl_sec, then the rollout continues" {
	local ttl=60 lost t_lost t_next
	local n
	for n in n1 n2 n3; do SIM_SLOT_TTL=$ttl sim_node_add "$n" "rollout: {max_failures: 0}"; done
	# Whichever node reboots first is lost; the others come back normally.
	for n in n1 n2 n3; do touch "$(sim_node_dir "$n")/no-return"; done
	sim_need_reboot n1 n2 n3
	sim_start n1 n2 n3
	sim_wait_downs 1 30
	lost=$(awk '$2 == "down" { print $1; exit }' "$SIM_LEDGER")
	for n in n1 n2 n3; do [[ $n == "$lost" ]] || rm -f "$(sim_node_dir "$n")/no-return"; done
	_sim_wait 5 grep -q "^$lost lost " "$SIM_LEDGER"

	# Meanwhile the next node holds the lock and waits for the slot.
	sleep 5
	assert_equal "$(sim_downs)" 1
	run -0 bash -c "cat '$SIM_DIR'/nodes/*/daemon.log | grep '\"event\":\"slot_waiting\"'"
	assert_output --partial '"reason":"reboot_in_progress"'

	sim_wait_downs 2 $((ttl + 15))
	t_lost=$(awk '$2 == "down" { print $3; exit }' "$SIM_LEDGER")
	t_next=$(awk '$2 == "down" { n++; if (n == 2) { print $3; exit } }' "$SIM_LEDGER")
	echo "# the next node went down $(awk -v a="$t_lost" -v b="$t_next" 'BEGIN { printf "%.1f", b - a }') s after $lost (reboot_slot_ttl_sec $ttl)" >&3
	local others=()
	for n in n1 n2 n3; do [[ $n == "$lost" ]] || others+=("$n"); done
	sim_wait_completed 40 "${others[@]}"
	# Not before the slot could have expired (the checker fails otherwise).
	run -0 sim_check_ledger --slot-ttl "$ttl" --expect 3
	assert_output --partial "never more than 1 down at once: OK"
	assert_output --regexp "$lost +slot expired"
	# Without --slot-ttl the lost node counts as down for good: two down at once.
	run -1 sim_check_ledger --expect 3
}
