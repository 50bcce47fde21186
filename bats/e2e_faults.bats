#!/usr/bin/env bats
# Faults around the lock, with real daemons against a real 3-member etcd cluster
# (bats/lib/sim.bash, docs/e2e.md):
#
#   E2E-4  the lock holder crashes (daemon and crd-lock child SIGKILLed) before its
#          reboot: nobody else proceeds until its lease has run out
#   E2E-5  the need for a reboot vanishes between the pre-check and the re-check under
#          the lock: the cycle is aborted, the lock released, nothing reboots

load lib/common
load lib/etcd
load lib/sim

setup() { sim_e2e_setup; }
teardown() { sim_e2e_teardown; }

# now: Unix time with fractions.
now() { date +%s.%N; }

@test "E2E-4 the holder is SIGKILLed under the lock: the next node proceeds only after the lease TTL" {
	local ttl=6 d frozen="" n t_kill t_next
	# The under-lock health check of whoever holds the lock first freezes (the
	# first to claim $SIM_DIR/freeze), so the holder is killed at a known point:
	# seat held, no slot, no marker, no reboot command.
	SIM_LOCK_TTL=$ttl SIM_HEALTH_TIMEOUT=4 sim_nodes_add 3
	touch "$SIM_DIR/freeze"
	for n in n1 n2 n3; do
		d="$(sim_node_dir "$n")"
		sim_under_lock "$n" "if mv '$SIM_DIR/freeze' '$d/frozen' 2>/dev/null; then sleep 30; fi; exit 0"
	done
	sim_need_reboot n1 n2 n3
	sim_start n1 n2 n3

	_frozen() {
		for n in n1 n2 n3; do
			[[ -e "$(sim_node_dir "$n")/frozen" ]] && frozen=$n && return 0
		done
		return 1
	}
	_sim_wait 30 _frozen
	# The other two queue behind the frozen holder.
	_waiting() {
		for n in n1 n2 n3; do
			[[ $n == "$frozen" ]] && continue
			(($(sim_count_event "$n" lock_waiting) >= 1)) || return 1
		done
	}
	_sim_wait 3 _waiting
	sim_crash "$frozen"
	t_kill=$(now)
	assert_equal "$(sim_downs)" 0

	# The lease runs out between 2/3 TTL (keepalives every TTL/3) and TTL after
	# the crash; only then may the next node reboot.
	sim_wait_downs 1 $((ttl + 10))
	t_next=$(awk '$2 == "down" { print $3; exit }' "$SIM_LEDGER")
	local waited
	waited=$(awk -v a="$t_kill" -v b="$t_next" 'BEGIN { printf "%.2f", b - a }')
	echo "# next node went down ${waited} s after the holder was killed (lock_ttl_sec $ttl)" >&3
	awk -v w="$waited" -v ttl="$ttl" 'BEGIN { exit !(w >= ttl * 2 / 3 - 0.3) }' ||
		fail "the next node went down ${waited} s after the crash, before the lease (ttl $ttl) could have expired"
	awk -v w="$waited" -v ttl="$ttl" 'BEGIN { exit !(w <= ttl + 4) }' ||
		fail "the next node went down only ${waited} s after the crash: the expired lease was not noticed within ttl + 4 s"
	refute grep -q "^$frozen " "$SIM_LEDGER"

	# The crashed node boots again (without the freeze) and catches up.
	rm -f "$(sim_node_dir "$frozen")/hook-under-lock"
	local others=()
	for n in n1 n2 n3; do [[ $n == "$frozen" ]] || others+=("$n"); done
	sim_wait_completed 40 "${others[@]}"
	sim_start "$frozen"
	sim_wait_completed 40 "$frozen"
	run -0 sim_check_ledger --expect 3
	assert_output --partial "never more than 1 down at once: OK"
}

@test "E2E-5 the detector stops firing between the pre-check and the re-check: abort, lock released, no reboot" {
	sim_nodes_add 2
	# n1's pre-lock health check (after detect said yes, before the lock) removes
	# the marker: under the lock the detectors are asked again.
	sim_pre_lock n1 "rm -f '$(sim_node_dir n1)/reboot-required'; exit 0"
	sim_need_reboot n1
	sim_start n1 n2

	# The cycle child took the lock and gave up on the re-check.
	_aborted() { grep '"component":"crd-lock"' "$(sim_log n1)" | grep '"reason":"not_needed"' >/dev/null; }
	_sim_wait 20 _aborted
	sim_wait_event n1 lock_released 5
	run -0 grep '"component":"crd-lock"' "$(sim_log n1)"
	assert_output --partial '"event":"lock_acquired"'
	assert_output --partial '"event":"lock_released"'
	refute_output --partial '"event":"slot_taken"'
	# Released, not left to expire (lock_ttl_sec 5): nobody holds or waits now.
	run -0 bash -c "'$SIM_BIN_DIR/clusterrebootd' status --config '$(sim_node_dir n2)/config.yaml' --format json 2>/dev/null"
	assert_equal "$(json_field '.lock.holders | length')" 0
	assert_equal "$(json_field '.lock.waiters | length')" 0

	# No reboot, and n1 now publishes that it needs none.
	sleep 2
	assert_equal "$(sim_downs)" 0
	assert_equal "$(sim_reboot_required n1)" false
	assert_equal "$(sim_count_event n1 rebooting)" 0

	# The lock is free for the next node at once: n2 reboots now.
	sim_need_reboot n2
	sim_wait_completed 30 n2
	run -0 sim_check_ledger --expect 1
}
