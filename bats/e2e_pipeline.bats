#!/usr/bin/env bats
# The shell pipeline is as safe as the daemon (docs/cluster-protocol.md): nodes
# that run the README's two lines by hand (scripts/sim-pipeline) keep their
# reboot slot from the lock until `crd-lock complete` after their boot, so the
# ledger never shows more than max_holders down, across the reboot too, with a
# reboot command that returns at once (as systemctl reboot does). Pipeline nodes
# and daemons on one lock count each other. Nodes are simulated by
# bats/lib/sim.bash and scripts/sim-reboot against a real 3-member etcd.

load lib/common
load lib/etcd
load lib/sim

setup() { sim_e2e_setup; }
teardown() { sim_e2e_teardown; }

# pipeline_node NAME: a simulated node that runs the tools, not the daemon.
pipeline_node() {
	sim_node_add "$1"
	echo "SIM_DAEMON=$REPO_ROOT/scripts/sim-pipeline" >>"$(sim_node_dir "$1")/sim.env"
}

# rounds R NODE...: R times, every NODE needs a reboot; wait until all came back.
rounds() {
	local r=$1 n i
	shift
	for ((i = 1; i <= r; i++)); do
		sim_need_reboot "$@"
		_sim_wait $((10 * $# + 30)) _ups_ge $((i * $#)) || fail "round $i: $(sim_ups) reboots of $((i * $#)) after $((10 * $# + 30)) s"
		# Each node completed (its slot freed) before the next round.
		for n in "$@"; do
			_sim_wait 20 _slot_gone "$n" || fail "round $i: $n's reboot slot was not freed after its boot"
		done
	done
}
_ups_ge() { (($(sim_ups) >= $1)); }
_slot_gone() { [[ ! -e "$(sim_node_dir "$1")/state/reboot-slot.json" ]]; }

@test "3 pipeline nodes, 3 rounds: never two down, each rebooted once per round" {
	local nodes=(n1 n2 n3) n
	for n in "${nodes[@]}"; do pipeline_node "$n"; done
	sim_start "${nodes[@]}"
	rounds 3 "${nodes[@]}"
	run -0 sim_check_ledger --expect 9
	assert_output --partial "never more than 1 down at once: OK"
	for n in "${nodes[@]}"; do
		assert_equal "$(grep -c "^$n down " "$SIM_LEDGER")" 3
	done
}

@test "5 pipeline nodes, max_holders 2: never three down" {
	local nodes=(n1 n2 n3 n4 n5) n
	for n in "${nodes[@]}"; do
		pipeline_node "$n"
		sim_dropin "$n" 10-max <<<"max_holders: 2"
	done
	sim_start "${nodes[@]}"
	rounds 2 "${nodes[@]}"
	run -0 sim_check_ledger --max 2 --expect 10
	assert_output --partial "never more than 2 down at once: OK"
}

@test "2 pipeline nodes and 2 daemons on one lock, max_holders 1: never two down" {
	pipeline_node p1
	pipeline_node p2
	sim_node_add d1
	sim_node_add d2
	sim_start p1 p2 d1 d2
	rounds 2 p1 p2 d1 d2
	run -0 sim_check_ledger --expect 8
	assert_output --partial "never more than 1 down at once: OK"
}
