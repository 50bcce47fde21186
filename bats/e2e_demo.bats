#!/usr/bin/env bats
# The README's front door: scripts/demo (what `make demo` runs) completes a
# rollout and says so. It starts its own etcd and daemons and cleans up after
# itself; a smaller run than the default keeps it short. It shows the silences
# and notifications too.

load lib/common

setup() { common_setup; }

@test "make demo's script: 3 nodes reboot one at a time, and it says so" {
	run -0 env DEMO_NODES=3 DEMO_BOOT_SEC=2 NO_COLOR=1 "$REPO_ROOT/scripts/demo"
	assert_output --partial "never more than 1 down at once: OK"
	assert_output --partial "all 3 nodes rebooted one at a time and no longer need a reboot."
	# The timeline was printed, node by node.
	assert_output --regexp "node-3 +▼ down"
	# Each node silenced its alerts while it rebooted, and the receiver printed
	# the notifications (make e2e installs Alertmanager and builds the receiver).
	local n
	for n in node-1 node-2 node-3; do
		assert_output --regexp "$n +silences its alerts in Alertmanager"
		assert_output --regexp "$n +its silence expired"
		assert_output --regexp "$n +✉ notification reboot_starting: clusterrebootd: $n is rebooting"
		assert_output --regexp "$n +✉ notification reboot_completed: clusterrebootd: $n rebooted"
		assert_output --regexp "clusterrebootd@$n +expired at"
	done
	# It removed what it created.
	local dir
	dir=$(sed -n 's/.*Files: \([^ ]*clusterrebootd-demo\.[A-Za-z0-9]*\).*/\1/p' <<<"$output" | sed -n 1p)
	[[ -n "$dir" ]] || fail "the demo did not name its directory"
	[[ ! -e "$dir" ]] || fail "the demo left $dir behind"
}
