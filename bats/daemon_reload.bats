#!/usr/bin/env bats
# The running daemon and its signals, through the real binary: SIGHUP with a
# broken configuration is rejected and the old one keeps running; a good one
# takes effect; a restart-only change is named in a warning; SIGTERM stops it
# cleanly. No etcd is needed: no reboot is due, so the cycle stays local (the
# health-record publication fails against a closed port and only logs).

load lib/common

setup() {
	common_setup
	crd_config
	crd_config_dropin 10-daemon <<-EOF
		check_interval_sec: 1
		etcd_endpoints: ["http://127.0.0.1:9"]
		etcd_dial_timeout_sec: 1
	EOF
	LOG="$TEST_DIR/daemon.log"
	clusterrebootd run --config "$CONFIG" --log-format json >"$TEST_DIR/daemon.out" 2>"$LOG" &
	DAEMON=$!
	wait_log '"event":"started"'
}

teardown() {
	kill -KILL "$DAEMON" 2>/dev/null || true
	wait "$DAEMON" 2>/dev/null || true
}

# wait_log PATTERN [N]: wait (at most 20 s) until PATTERN occurs N times in the log.
wait_log() {
	local n=${2:-1} i
	for ((i = 0; i < 200; i++)); do
		[ "$(grep -c -- "$1" "$LOG" 2>/dev/null)" -ge "$n" ] && return 0
		sleep 0.1
	done
	echo "--- daemon log:" >&2
	cat "$LOG" >&2
	fail "'$1' did not appear $n time(s) in the daemon's log within 20 s"
}

@test "SIGHUP with a broken configuration keeps the old one running and says why" {
	echo "bogus_key: 1" >>"$CONFIG"
	kill -HUP "$DAEMON"
	wait_log '"event":"reload_failed"'
	run grep '"event":"reload_failed"' "$LOG"
	assert_output --partial 'bogus_key'
	assert_output --partial 'running configuration stays in effect'
	# Still alive and still working: identical cycle lines and repeated
	# publish_failed lines are rate-limited by design, but every publication
	# starts a crd-lock child, which logs etcd_unavailable each time.
	local n
	n=$(grep -c '"event":"etcd_unavailable"' "$LOG" || true)
	wait_log '"event":"etcd_unavailable"' $((n + 2))
	kill -0 "$DAEMON"
}

@test "SIGHUP with a good configuration takes effect; a restart-only change is named" {
	crd_config_dropin 20-reload <<-EOF
		node_name: "renamed-node"
		windows:
		  deny: ["* 00:00-24:00"]
	EOF
	kill -HUP "$DAEMON"
	wait_log '"event":"reload_restart_only"'
	run grep '"event":"reload_restart_only"' "$LOG"
	assert_output --partial 'node_name'
	wait_log '"changed":true'
	# The node keeps its name until a restart.
	run grep -c '"node":"renamed-node"' "$LOG"
	assert_output 0
}

@test "SIGTERM stops the daemon cleanly with exit 0" {
	kill -TERM "$DAEMON"
	local rc=0
	wait "$DAEMON" || rc=$?
	[ "$rc" -eq 0 ] || fail "clusterrebootd exited $rc on SIGTERM, want 0"
	wait_log '"event":"stopped"'
}
