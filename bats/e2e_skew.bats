#!/usr/bin/env bats
# Clock skew (PRD 11.4): one node's wall clock is hours off, with real daemons and
# a real 3-member etcd cluster (bats/lib/sim.bash, docs/e2e.md "Clock skew").
# n2 runs clusterrebootd and crd-lock built with the build tag crdtestclock
# (.tools/bin-testclock, make e2e builds them) and CRD_TEST_CLOCK_OFFSET in its
# environment; n1 and n3 run the released binaries of bin/. Leases are counted
# by etcd, so the skew cannot break mutual exclusion; windows are evaluated on
# the node's own clock, so n2 reboots in what it believes is its window.
#
# E2E_SKEW_OFFSET sets n2's offset (default 5h; a negative one such as -7h30m works
# the same). The scenarios fail when the property breaks:
#   E2E_SKEW_OFFSET=0s make e2e E2E_FILES=bats/e2e_skew.bats
#       # no skew: n2 reboots inside the real window ("windows on the node's own clock")
#   E2E_SKEW_CONFIG='max_holders: 2' make e2e E2E_FILES=bats/e2e_skew.bats
#       # every node's drop-in: the ledger check reports two nodes down at once

load lib/common
load lib/etcd
load lib/sim

setup() {
	sim_e2e_setup
	SKEW_BIN=${TESTCLOCK_BIN_DIR:-$REPO_ROOT/.tools/bin-testclock}
	SKEW=${E2E_SKEW_OFFSET:-5h}
	local b
	for b in clusterrebootd crd-lock; do
		[[ -x "$SKEW_BIN/$b" ]] || fail "$SKEW_BIN/$b is missing: run make e2e-testclock"
	done
	# A build whose clock cannot be skewed would make these tests pass vacuously.
	run -0 "$SKEW_BIN/clusterrebootd" version --format json
	assert_equal "$(jq -r .test_clock <<<"$output")" true
	run -0 "$REPO_ROOT/bin/clusterrebootd" version --format json
	assert_equal "$(jq -r '.test_clock // "absent"' <<<"$output")" absent
}
teardown() { sim_e2e_teardown; }

# skew_node_add NAME [YAML]: NAME on the test-clock binaries, its clock $SKEW off.
skew_node_add() {
	SIM_BIN_DIR=$SKEW_BIN SIM_NODE_ENV="CRD_TEST_CLOCK_OFFSET=$SKEW" sim_node_add "$@"
}

# extra_config NAME...: $E2E_SKEW_CONFIG as a drop-in of each NAME (see the header).
extra_config() {
	local n
	[[ -n "${E2E_SKEW_CONFIG:-}" ]] || return 0
	for n in "$@"; do printf '%s\n' "$E2E_SKEW_CONFIG" | sim_dropin "$n" 20-override; done
}

# hhmm EPOCH: the UTC wall-clock time HH:MM of EPOCH.
hhmm() { date -u -d "@$1" +%H:%M; }

# window_around EPOCH: a daily allow window from an hour before EPOCH to an hour
# after it (across midnight when need be: such a span belongs to its first day).
window_around() { echo "* $(hhmm $(($1 - 3600)))-$(hhmm $(($1 + 3600)))"; }

# offset_sec: $SKEW in seconds.
offset_sec() {
	local s=$SKEW sign=1 total=0 n u
	[[ "$s" == -* ]] && sign=-1 s=${s#-}
	while [[ "$s" =~ ^([0-9]+)([hms])(.*)$ ]]; do
		n=${BASH_REMATCH[1]} u=${BASH_REMATCH[2]} s=${BASH_REMATCH[3]}
		case "$u" in h) total=$((total + n * 3600)) ;; m) total=$((total + n * 60)) ;; s) total=$((total + n)) ;; esac
	done
	[[ -z "$s" ]] || fail "offset_sec: cannot read E2E_SKEW_OFFSET=$SKEW (write e.g. 5h, -7h30m, 0s)"
	echo $((sign * total))
}

# assert_skew NAME OFFSET_SEC: NAME's crd-lock child wrote the time of its reboot
# request (reboot-history.json "at", from the marker) OFFSET_SEC (± 60 s) from the
# real time the ledger recorded its "down": the child ran on the skewed clock.
assert_skew() {
	local at down diff
	at=$(jq -r '.reboots[-1].at' "$(sim_node_dir "$1")/state/reboot-history.json")
	down=$(awk -v n="$1" '$1 == n && $2 == "down" { t = $3 } END { printf "%d", t }' "$SIM_LEDGER")
	diff=$(($(date -u -d "$at" +%s) - down - $2))
	if ((diff < -60 || diff > 60)); then
		fail "$1: reboot requested at $at, ledger down at $(date -u -d "@$down" +%FT%TZ): off by $((diff + $2)) s, want $2 s"
	fi
}

# window_blocked NAME: how many of NAME's cycles its window blocked (its metrics
# textfile, written after every cycle; 0 if absent).
window_blocked() {
	local f
	f="$(sim_node_dir "$1")/metrics.prom"
	[[ -f "$f" ]] || { echo 0; return; }
	awk '$1 == "clusterrebootd_reboot_blocked_total{reason=\"window\"}" { v = $2 } END { print v + 0 }' "$f"
}
_window_blocked_gt() { (($(window_blocked "$1") > $2)); }

# _waits_or_down NAME: NAME logged slot_waiting, or the ledger has two downs.
_waits_or_down() { (($(sim_count_event "$1" slot_waiting) >= 1 || $(sim_downs) >= 2)); }

@test "skew: a node whose clock is hours off keeps mutual exclusion" {
	# n1 is down long enough for n2 to take the lock and wait under it for n1's
	# slot, whose "since" is hours away on n2's clock.
	SIM_BOOT_SEC=6 sim_node_add n1
	skew_node_add n2
	sim_node_add n3
	extra_config n1 n2 n3
	sim_need_reboot n1 n2 n3

	sim_start n1
	sim_wait_downs 1 20
	sim_start n2
	# The skew reached n2's daemon (sim-reboot exports it at every boot).
	grep -qz "^CRD_TEST_CLOCK_OFFSET=$SKEW\$" "/proc/$(cat "$(sim_node_dir n2)/daemon.pid")/environ"
	# n2 waits for n1's slot (or, when exclusion is broken, goes down too).
	_sim_wait 15 _waits_or_down n2
	sim_start n3
	sim_wait_completed 40 n1 n2 n3

	run -0 sim_check_ledger --expect 3
	assert_output --partial "never more than 1 down at once: OK"
	local n rollout
	rollout=$(grep '^rollout:' <<<"$output")
	(($(sim_count_event n2 slot_waiting) >= 1))
	for n in n1 n2 n3; do
		assert_equal "$(sim_count_event "$n" reboot_completed)" 1
		sim_wait_reboot_required_false "$n" 15
		assert_equal "$(sim_reboot_required "$n")" false
	done
	# n2's crd-lock child inherited the offset, n1's clock is the real one.
	assert_skew n2 "$(offset_sec)"
	assert_skew n1 0
	# Every node sees that n2 runs a test build (its health record's version).
	run -0 sim_status n3
	[[ "$(jq -r '.view.nodes[] | select(.node == "n2") | .version' <<<"$output")" == *+testclock ]]
	[[ "$(jq -r '.view.nodes[] | select(.node == "n1") | .version' <<<"$output")" != *+testclock ]]
	echo "# $rollout" >&3
}

@test "skew: a node evaluates windows on its own clock" {
	local now n allow skewed
	now=$(date -u +%s)
	allow=$(window_around "$now")
	for n in n1 n2 n3; do
		local add=sim_node_add
		[[ "$n" == n2 ]] && add=skew_node_add
		"$add" "$n" "windows:
  allow: [\"$allow\"]
  timezone: \"UTC\""
	done
	extra_config n1 n2 n3
	sim_need_reboot n1 n2 n3
	sim_start n1 n2 n3

	# n1 and n3 are inside the window by the real clock; n2, hours ahead, is not.
	sim_wait_completed 40 n1 n3
	_sim_wait 10 grep -q '"reason":"window"' "$(sim_log n2)"
	grep '"reason":"window"' "$(sim_log n2)" | grep 'outside every allow window' >/dev/null
	# The lock is free and n2 still needs a reboot, but its window stays closed:
	# its blocked cycles go on (the metrics textfile; the log folds repeats).
	local before
	before=$(window_blocked n2)
	sleep 3
	_sim_wait 10 _window_blocked_gt n2 "$before"
	assert_equal "$(sim_downs)" 2
	refute grep -q '"event":"lock_acquired"' "$(sim_log n2)"
	assert_equal "$(sim_reboot_required n2)" true
	# crd-window agrees at n2's instant, and says open at the real one.
	skewed=$(date -u -d "@$((now + $(offset_sec)))" +%FT%TZ)
	run -5 crd-window --config "$(sim_node_dir n2)/config.yaml" --at "$skewed" --format json
	run -0 crd-window --config "$(sim_node_dir n2)/config.yaml" --at "$(date -u -d "@$now" +%FT%TZ)" --format json

	# n2's window moves to its own clock: drop-in changed, SIGHUP.
	printf 'windows:\n  allow: ["%s"]\n  timezone: "UTC"\n' "$(window_around $((now + $(offset_sec))))" | sim_dropin n2 10-scenario
	sim_hup n2
	sim_wait_event n2 reloaded 10
	sim_wait_completed 30 n2

	run -0 sim_check_ledger --expect 3
	assert_output --partial "never more than 1 down at once: OK"
	assert_skew n2 "$(offset_sec)"
}

@test "skew: how long a lower wave has needed its reboot is etcd's measure, not its clock" {
	# n2, a canary (wave 0) whose clock is 5 hours behind, needs a reboot but
	# its kill switch keeps it from taking one: it holds wave 1 back until it
	# has needed its reboot for longer than wave_timeout_sec (an hour). Its
	# needs_reboot_since, written by its clock, says 5 hours ago: a rule that
	# compared clocks let n1 (wave 1) go at once. The needs lease etcd ages
	# says a few seconds.
	SIM_BIN_DIR=$SKEW_BIN SIM_NODE_ENV="CRD_TEST_CLOCK_OFFSET=-5h" sim_node_add n2 "rollout: {wave: 0, wave_timeout_sec: 3600}"
	sim_node_add n1 "rollout: {wave: 1, wave_timeout_sec: 3600}"
	touch "$(sim_node_dir n2)/disable"
	sim_need_reboot n1 n2
	sim_start n2 n1
	_sim_wait 20 grep -q '"reason":"wave"' "$(sim_log n1)"
	grep '"reason":"wave"' "$(sim_log n1)" | grep 'n2 (wave 0' >/dev/null
	sleep 5
	assert_equal "$(sim_downs)" 0
	# n2's record says since 5 hours ago (its clock) and names its needs lease.
	run -0 sim_status n1
	local since lease
	since=$(jq -r '.view.nodes[] | select(.node == "n2") | .needs_reboot_since' <<<"$output")
	lease=$(jq -r '.view.nodes[] | select(.node == "n2") | .needs_reboot_lease // ""' <<<"$output")
	(($(date -u +%s) - $(date -u -d "$since" +%s) > 4 * 3600)) || fail "n2's needs_reboot_since $since is not hours behind"
	[[ -n "$lease" ]] || fail "n2's record names no needs lease"
}
