#!/usr/bin/env bats
# Silences (docs/silences.md) in a daemon rollout: 3 simulated nodes
# (bats/lib/sim.bash) against a real etcd and Debian's real Alertmanager, each
# configured to silence its own alerts. Each node creates exactly one silence
# when it takes its reboot slot (seen active with amtool while it reboots, never
# two at once with max_holders 1), and expires it after its reboot completed.
# Skipped without prometheus-alertmanager and amtool, unless
# CRD_TEST_MONITORING=1 (make test-monitoring), which fails instead.

load lib/common
load lib/etcd
load lib/sim
load lib/monitoring

setup() {
	# Read before common_setup, which clears CRD_* variables.
	AM_BIN=${CRD_TEST_ALERTMANAGER:-/usr/bin/prometheus-alertmanager}
	local required=${CRD_TEST_MONITORING:-}
	if [[ ! -x "$AM_BIN" ]] || ! command -v amtool >/dev/null; then
		[[ "$required" == 1 ]] && fail "$AM_BIN or amtool missing: make test-monitoring installs prometheus-alertmanager"
		skip "no prometheus-alertmanager/amtool (make test-monitoring installs them)"
	fi
	sim_e2e_setup single
	am_start "$TEST_DIR/am" || fail "no alertmanager"
}

teardown() {
	[[ -n "${AM_POLL_PID:-}" ]] && kill "$AM_POLL_PID" 2>/dev/null
	sim_e2e_teardown
	am_stop
}

# am_poll FILE: every 0.1 s, one line with the createdBy of every active
# silence (space-separated; empty line: none), until killed.
am_poll() {
	while :; do
		amtool --alertmanager.url="$AM_URL" silence query -o json 2>/dev/null |
			jq -r '[.[] | select(.status.state == "active") | .createdBy] | sort | join(" ")' >>"$1"
		sleep 0.1
	done
}

@test "rollout of 3 nodes: one silence per node while it reboots, expired after it completed" {
	local n nodes=(n1 n2 n3)
	sim_nodes_add 3
	for n in "${nodes[@]}"; do
		sim_dropin "$n" 20-silences <<-EOF
			silences:
			  alertmanager_url: $AM_URL
			  matchers: ['instance=~"{{.Node}}(:[0-9]+)?"']
			  timeout_sec: 2
		EOF
	done
	am_poll "$TEST_DIR/active" 3>&- &
	AM_POLL_PID=$!
	sim_need_reboot "${nodes[@]}"
	sim_start "${nodes[@]}"
	sim_wait_completed 60 "${nodes[@]}"
	kill "$AM_POLL_PID"
	AM_POLL_PID=

	run -0 sim_check_ledger --expect 3
	# No silence is left active: each node expired its own after completing.
	run -0 amtool --alertmanager.url="$AM_URL" silence query -q
	assert_output ""
	# Exactly one silence per node, made by that node, for that node's alerts.
	run -0 amtool --alertmanager.url="$AM_URL" silence query --expired -o json
	local all=$output
	assert_equal "$(jq length <<<"$all")" 3
	for n in "${nodes[@]}"; do
		assert_equal "$(jq --arg n "$n" '[.[] | select(.createdBy == "clusterrebootd@" + $n)] | length' <<<"$all")" 1
		assert_equal "$(jq -r --arg n "$n" '.[] | select(.createdBy == "clusterrebootd@" + $n) | .matchers[0].value' <<<"$all")" "$n(:[0-9]+)?"
		jq -r --arg n "$n" '.[] | select(.createdBy == "clusterrebootd@" + $n) | .comment' <<<"$all" | grep "node $n is rebooting" >/dev/null
		assert_equal "$(sim_count_event "$n" silence_created)" 1
		assert_equal "$(sim_count_event "$n" silence_expired)" 1
		# Each node's silence was seen active while it rebooted.
		grep -qx "clusterrebootd@$n" "$TEST_DIR/active"
	done
	# Never two silences active at once (max_holders 1).
	run grep ' ' "$TEST_DIR/active"
	assert_failure
	# The daemons counted no failure.
	for n in "${nodes[@]}"; do
		grep -q '^clusterrebootd_silence_failures_total{op="create"} 0$' "$(sim_node_dir "$n")/metrics.prom"
	done
	echo "# $(grep -c . "$TEST_DIR/active") polls, $(grep -c '@' "$TEST_DIR/active") with a silence active" >&3
}
