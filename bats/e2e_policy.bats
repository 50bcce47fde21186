#!/usr/bin/env bats
# The cluster gates with real daemons and a real 3-member etcd cluster
# (bats/lib/sim.bash, docs/e2e.md):
#
#   E2E-2  the reference health script (scripts/health-check.sh) says no while etcd
#          has lost its quorum: no reboot, the reason in the log and the metrics;
#          once the members are back the reboot goes ahead
#   E2E-3  forbid_if_only_fallback_left: the only healthy fallback node never
#          reboots, the others do; once a second fallback is healthy it may

load lib/common
load lib/etcd
load lib/sim

setup() { sim_e2e_setup; }
teardown() { sim_e2e_teardown; }

@test "E2E-2 the reference health script blocks while etcd has no quorum; the reboot follows its return" {
	# The script's own per-call timeout is 5 s: give the gate more than that.
	SIM_HEALTH_TIMEOUT=8 SIM_LOCK_TTL=10 sim_node_add n1
	sim_health_script n1 "$_sim_repo_root/scripts/health-check.sh"
	sim_need_reboot n1

	# Two of three members stopped: quorum lost. (One of three stopped leaves a
	# quorum of two, which the reference script accepts: see docs/e2e.md.)
	etcd_member_stop 2
	etcd_member_stop 3
	sim_start n1
	local prom
	prom="$(sim_node_dir n1)/metrics.prom"
	_blocked_metric() { grep -Eq '^clusterrebootd_reboot_blocked_total\{reason="health"\} [1-9]' "$prom" 2>/dev/null; }
	_sim_wait 40 _blocked_metric
	run -0 grep '"reason":"health"' "$(sim_log n1)"
	assert_output --partial 'etcd has no quorum'
	run -0 grep -E '^clusterrebootd_health_checks_total\{status="unhealthy"\} [1-9]' "$prom"
	assert_equal "$(sim_downs)" 0
	refute grep -q '"event":"lock_acquired"' "$(sim_log n1)"

	# Quorum back: the same script now says yes and n1 reboots.
	etcd_member_start 2
	etcd_member_start 3
	sim_wait_completed 60 n1
	run -0 sim_check_ledger --expect 1
}

@test "E2E-3 forbid_if_only_fallback_left: the only healthy fallback never reboots, the others do" {
	local policy='cluster_policies:
  forbid_if_only_fallback_left: true
  fallback_nodes: ["n1", "n2"]'
	sim_node_add n1 "$policy"
	sim_node_add n2 "$policy"
	sim_node_add n3 "$policy"
	# n2, the other fallback node, is down (its daemon not running: no record).
	sim_need_reboot n1 n3
	sim_start n1 n3
	sim_wait_completed 30 n3
	_policy_blocked() { grep '"reason":"policy"' "$(sim_log n1)" | grep 'only healthy fallback' >/dev/null; }
	_sim_wait 10 _policy_blocked
	sleep 3
	refute grep -q '^n1 ' "$SIM_LEDGER"
	assert_equal "$(sim_reboot_required n1)" true
	run -0 sim_check_ledger --expect 1

	# n2 comes up healthy: n1 is no longer the only fallback and reboots.
	sim_start n2
	sim_wait_completed 30 n1
	run -0 sim_check_ledger --expect 2
	assert_output --partial "never more than 1 down at once: OK"
}
