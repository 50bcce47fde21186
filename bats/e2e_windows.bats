#!/usr/bin/env bats
# Maintenance windows and reloads with real daemons and a real 3-member etcd
# cluster (bats/lib/sim.bash, docs/e2e.md): inside a deny window nothing reboots;
# a configuration change and SIGHUP that remove the window let the rollout proceed.

load lib/common
load lib/etcd
load lib/sim

setup() { sim_e2e_setup; }
teardown() { sim_e2e_teardown; }

@test "a deny window covering now: nothing reboots; SIGHUP after removing it: the rollout proceeds" {
	local n deny='windows:
  deny: ["* 00:00-24:00"]
  timezone: "UTC"'
	for n in n1 n2 n3; do sim_node_add "$n" "$deny"; done
	sim_need_reboot n1 n2 n3
	sim_start n1 n2 n3
	for n in n1 n2 n3; do
		_sim_wait 10 grep -q '"reason":"window"' "$(sim_log "$n")"
	done
	sleep 3
	assert_equal "$(sim_downs)" 0
	for n in n1 n2 n3; do
		refute grep -q '"event":"lock_acquired"' "$(sim_log "$n")"
	done

	# The change freeze is over: the drop-in goes, every daemon reloads.
	for n in n1 n2 n3; do
		printf 'windows:\n  timezone: "UTC"\n' | sim_dropin "$n" 10-scenario
		sim_hup "$n"
	done
	for n in n1 n2 n3; do sim_wait_event "$n" reloaded 10; done
	sim_wait_completed 40 n1 n2 n3
	run -0 sim_check_ledger --expect 3
	assert_output --partial "never more than 1 down at once: OK"
}
