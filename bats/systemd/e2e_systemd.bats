#!/usr/bin/env bats
# Under real systemd (make e2e-systemd, root): the built .deb in systemd-nspawn
# containers booted from the cached Debian root (bats/lib/systemd.bash), against a
# real etcd on the host's loopback. Nothing is simulated: the unit is the
# package's (Type=notify, Restart=always, its sandbox), the reboot is the
# package's default reboot_command `/usr/bin/systemctl reboot`, which reboots
# the container (nspawn exits with 133; the boot loop starts it again). Each
# container has its own PID namespace: no test reboots this machine.
# docs/e2e.md, "Under real systemd", says what each assertion proves.

load ../lib/common
load ../lib/etcd
load ../lib/systemd

setup_file() { sd_setup_file; }

setup() {
	export ETCD_TEST_DIR="$BATS_TEST_TMPDIR/etcd"
	etcd_start
	sd_init
}

teardown() {
	[[ -z "${BATS_TEST_COMPLETED:-}" ]] && sd_diag
	sd_stop_all
	etcd_stop_all
}

@test "systemd: the unit starts, reports READY via sd_notify, and Restart=always brings it back after SIGKILL" {
	sd_node_add c0
	sd_start c0
	sd_wait_active c0 90

	# Type=notify: "active" is reached only when the daemon sent READY=1;
	# StatusText is what it sends as STATUS= after each cycle.
	assert_equal "$(sd_show c0 Type)" notify
	assert_equal "$(sd_show c0 ActiveState)" active
	assert_equal "$(sd_show c0 SubState)" running
	assert_equal "$(sd_show c0 NRestarts)" 0
	local pid1 status
	pid1=$(sd_show c0 MainPID)
	[[ "$pid1" -gt 0 ]]
	for ((i = 0; i < 20; i++)); do
		status=$(sd_show c0 StatusText)
		[[ -n "$status" ]] && break
		sleep 0.5
	done
	echo "StatusText: $status"
	[[ "$status" == idle* ]]

	# SIGKILL: no clean exit, so Restart=always (RestartSec=5) starts a new one.
	sd_exec c0 systemctl kill -s KILL clusterrebootd.service
	local deadline=$((SECONDS + 60)) pid2=""
	until [[ "$(sd_show c0 NRestarts)" == 1 && "$(sd_show c0 ActiveState)" == active ]]; do
		((SECONDS < deadline)) || fail "clusterrebootd in c0 was not restarted within 60 s"
		sleep 0.5
	done
	pid2=$(sd_show c0 MainPID)
	echo "MainPID before $pid1, after $pid2"
	[[ "$pid2" -gt 0 && "$pid2" != "$pid1" ]]
	assert_equal "$(sd_show c0 SubState)" running
	# The container did not reboot: one boot, no nspawn exit yet.
	assert_equal "$(sd_exits c0)" ""
}

@test "systemd: systemctl reload of a broken configuration fails and the daemon keeps the one it runs" {
	sd_node_add c0
	sd_start c0
	sd_wait_active c0 90
	local pid journal cfgd
	pid=$(sd_show c0 MainPID)
	cfgd="$(sd_root c0)/etc/clusterrebootd/config.d"
	journal() { journalctl -D "$(sd_root c0)/var/log/journal" -u clusterrebootd.service -o cat 2>/dev/null; }

	# An unknown key: ExecReload's validate-config exits 2, so the reload
	# fails, systemd never sends SIGHUP (no reload_failed from the daemon),
	# and the same process runs on.
	echo 'check_interval: 5' >"$cfgd/30-broken.yaml"
	run sd_exec c0 systemctl reload clusterrebootd.service
	echo "$output"
	[[ "$status" -ne 0 ]]
	for ((i = 0; i < 20; i++)); do
		journal | grep -q 'check_interval' && break
		sleep 0.5
	done
	journal | grep 'check_interval'
	run ! grep -q '"event":"reload_failed"' <<<"$(journal)"
	assert_equal "$(sd_show c0 MainPID)" "$pid"
	assert_equal "$(sd_show c0 ActiveState)" active
	assert_equal "$(sd_show c0 SubState)" running

	# A valid change: the reload succeeds and the daemon applies it; the
	# restart-only node_name is kept, with a warning.
	rm "$cfgd/30-broken.yaml"
	printf 'check_interval_sec: 2\nnode_name: c0-renamed\n' >"$cfgd/30-ok.yaml"
	run -0 sd_exec c0 systemctl reload clusterrebootd.service
	for ((i = 0; i < 20; i++)); do
		journal | grep -q '"event":"reloaded"' && break
		sleep 0.5
	done
	journal | grep -q '"event":"reloaded"'
	assert_equal "$(sd_show c0 MainPID)" "$pid"

	# journald priorities: the daemon's stderr is the journal (JOURNAL_STREAM),
	# so each line carries its level as an sd-daemon prefix, which journald
	# strips: `-p warning` finds the warning and not the info lines.
	local warnings
	warnings=$(journalctl -D "$(sd_root c0)/var/log/journal" -u clusterrebootd.service -p warning -o cat)
	echo "warnings: $warnings"
	grep -q '"event":"reload_restart_only"' <<<"$warnings"
	run ! grep -q '"event":"started"' <<<"$warnings"
	run ! grep -q '^<[0-7]>' <<<"$(journal)"
}

@test "systemd: three containers need a reboot; each really reboots once, never two at a time" {
	local n nodes=(c1 c2 c3) host_boot
	host_boot=$(cat /proc/sys/kernel/random/boot_id)
	for n in "${nodes[@]}"; do sd_node_add "$n"; done
	sd_need_reboot "${nodes[@]}"
	sd_start "${nodes[@]}"
	sd_wait_completed 240 "${nodes[@]}"
	for n in "${nodes[@]}"; do sd_wait_active "$n" 60; done

	# Mutual exclusion: from "going down" to "clusterrebootd ready again" no two
	# containers overlap; three reboots in all.
	sd_ledger "$BATS_TEST_TMPDIR/ledger"
	cat "$BATS_TEST_TMPDIR/ledger"
	run -0 "$REPO_ROOT/scripts/e2e-ledger-check" --max 1 --expect 3 "$BATS_TEST_TMPDIR/ledger"
	echo "$output"
	assert_output --partial "never more than 1 down at once: OK"
	echo "# $(grep '^rollout:' <<<"$output")" >&3

	for n in "${nodes[@]}"; do
		local events boots history
		events=$(sd_events "$n")
		# A real reboot: nspawn exited exactly once, with 133, and is running again.
		assert_equal "$(sd_exits "$n")" 133
		# Two boots: the first went down once (crd-e2e-down.service) and the
		# second came up with clusterrebootd ready and another boot id. The
		# first boot's "up" is missing when the daemon rebooted the container
		# before crd-e2e-ledger.service (ordered after it) had run; when it is
		# there, it has the first boot's id.
		local first second
		assert_equal "$(awk '$1 == "down"' <<<"$events" | wc -l)" 1
		first=$(awk '$1 == "down" { print $3 }' <<<"$events")
		assert_equal "$(awk '$1 == "down" { d = 1; next } d && $1 == "up"' <<<"$events" | wc -l)" 1
		second=$(awk '$1 == "down" { d = 1; next } d && $1 == "up" { print $3 }' <<<"$events")
		[[ -n "$first" && -n "$second" && "$first" != "$second" ]]
		run -0 awk -v b="$first" '$1 == "down" { exit } $1 == "up" && $3 != b { print; bad = 1 } END { exit bad }' <<<"$events"
		# The ledger's interval holds the real reboot: the container went down,
		# then nspawn exited, then the next boot's daemon was ready.
		local down exited up
		down=$(awk '$1 == "down" { print $2; exit }' <<<"$events")
		up=$(awk '$1 == "down" { d = 1; next } d && $1 == "up" { print $2; exit }' <<<"$events")
		exited=$(awk '$1 == "exit" { print $3; exit }' "$SD_DIR/$n/loop.log")
		echo "$n: down $down, nspawn exited $exited, ready $up"
		awk -v d="$down" -v e="$exited" -v u="$up" 'BEGIN { exit !(d < e && e < u) }'
		# The daemon's own record, kept in state_dir across the reboot: one
		# coordinated reboot, which happened, leaving the first boot (the
		# container's boot id, not the host's).
		history=$(sd_history "$n")
		echo "$n history: $history"
		assert_equal "$(jq '.reboots | length' <<<"$history")" 1
		assert_equal "$(jq -r '.reboots[0].rebooted' <<<"$history")" true
		assert_equal "$(jq -r '.reboots[0].boot_id' <<<"$history")" "$first"
		[[ "$(jq -r '.reboots[0].boot_id' <<<"$history")" != "$host_boot" ]]
		# The detector no longer fires, nothing waits for this node.
		[[ ! -e "$(sd_root "$n")/var/lib/clusterrebootd/reboot-marker.json" ]]
		[[ ! -e "$(sd_root "$n")$SD_DETECTOR" ]]
		assert_equal "$(journalctl -D "$(sd_root "$n")/var/log/journal" -u clusterrebootd.service -o cat |
			grep -c '"event":"reboot_completed"')" 1
	done

	# What an operator sees on a node: every record says reboot_required false,
	# no reboot slot is left, nobody holds the lock; locally one reboot today
	# and the completion time.
	local status
	for ((i = 0; i < 20; i++)); do
		status=$(sd_exec c1 clusterrebootd status --format json 2>/dev/null) || true
		[[ "$(jq '[.view.nodes[] | select(.reboot_required == false)] | length' <<<"$status" 2>/dev/null)" == 3 ]] && break
		sleep 0.5
	done
	echo "status: $status"
	for n in "${nodes[@]}"; do
		assert_equal "$(jq -r --arg n "$n" '.view.nodes[] | select(.node == $n) | .reboot_required' <<<"$status")" false
	done
	assert_equal "$(jq '.view.rebooting | length' <<<"$status")" 0
	assert_equal "$(jq '.lock.holders | length' <<<"$status")" 0
	assert_equal "$(jq '.local.reboots_last_day' <<<"$status")" 1
	[[ -n "$(jq -r '.local.last_reboot // empty' <<<"$status")" ]]
}
