#!/usr/bin/env bats
# The local tools composed by the shell on one node, as an operator would chain
# them from cron or a systemd unit:
#
#   crd-detect && crd-window && crd-gate && crd-reboot
#
# The chain's exit status is the one of the tool that stopped it, and the reboot
# command (a script recording its calls; never a real reboot) runs only when
# every step said yes. Time is pinned with crd-window --at.

load lib/common

# Tuesday 2026-12-01, 22:30 UTC.
TUESDAY_EVENING=2026-12-01T22:30:00Z
# Monday 2026-11-30, 12:00 UTC.
MONDAY_NOON=2026-11-30T12:00:00Z

setup() {
	common_setup
	crd_config
	AT=$TUESDAY_EVENING
}

# pipeline [CRD-REBOOT ARGS...]: the chain, each tool with one JSON object on stdout.
pipeline() {
	crd-detect --config "$CONFIG" --format json &&
		crd-window --config "$CONFIG" --format json --at "$AT" &&
		crd-gate --config "$CONFIG" --format json &&
		crd-reboot --config "$CONFIG" --format json "$@"
}

# json_tools: the tools that printed a result, in order, one line.
json_tools() {
	jq -rs 'map(.tool) | join(" ")' <<<"$output"
}

@test "no reboot required: the chain stops at crd-detect with 1, nothing rebooted" {
	run -1 --separate-stderr pipeline
	assert_equal "$(json_tools)" "crd-detect"
	assert_equal "$(json_field exit_name)" "no"
	assert_equal "$(reboot_calls)" 0
}

@test "reboot required, window open, healthy: the reboot command runs once" {
	touch "$MARKER"
	run -0 --separate-stderr pipeline
	assert_equal "$(json_tools)" "crd-detect crd-window crd-gate crd-reboot"
	assert_equal "$(json_field exit_name)" "ok"
	assert_equal "$(reboot_calls)" 1
	assert_equal "$(cat "$REBOOT_CALLS")" "reboot now"
}

@test "outside every allow window: the chain stops at crd-window with 5, nothing rebooted" {
	touch "$MARKER"
	crd_config_dropin windows <<-EOF
		windows:
		  allow: ["Tue 22:00-23:00"]
		  timezone: "UTC"
	EOF
	AT=$MONDAY_NOON
	run -5 --separate-stderr pipeline
	assert_equal "$(json_tools)" "crd-detect crd-window"
	assert_equal "$(json_field exit_name)" "window_closed"
	assert_equal "$(reboot_calls)" 0
}

@test "inside the same allow window the chain goes through" {
	touch "$MARKER"
	crd_config_dropin windows <<-EOF
		windows:
		  allow: ["Tue 22:00-23:00"]
		  timezone: "UTC"
	EOF
	run -0 --separate-stderr pipeline
	assert_equal "$(reboot_calls)" 1
}

@test "inside a deny window: the chain stops at crd-window with 5, nothing rebooted" {
	touch "$MARKER"
	crd_config_dropin windows <<-EOF
		windows:
		  deny: ["* 22:00-23:00"]
		  timezone: "UTC"
	EOF
	run -5 --separate-stderr pipeline
	assert_equal "$(json_field tool)" "crd-window"
	assert_equal "$(reboot_calls)" 0
}

@test "failing health script: the chain stops at crd-gate with 3, nothing rebooted" {
	touch "$MARKER"
	health_script_exits 1
	run -3 --separate-stderr pipeline
	assert_equal "$(json_tools)" "crd-detect crd-window crd-gate"
	assert_equal "$(json_field exit_name)" "health_blocked"
	assert_equal "$(reboot_calls)" 0
}

@test "kill switch file present: the chain ends with 6, nothing rebooted" {
	touch "$MARKER"
	echo "frozen for the quarterly close" >"$KILL_SWITCH"
	run -6 --separate-stderr pipeline
	assert_equal "$(json_field exit_name)" "kill_switch"
	assert_equal "$(reboot_calls)" 0
}

@test "crd-reboot --dry-run: the chain succeeds with 0 and nothing is rebooted" {
	touch "$MARKER"
	run -0 --separate-stderr pipeline --dry-run
	assert_equal "$(json_tools)" "crd-detect crd-window crd-gate crd-reboot"
	assert_equal "$(reboot_calls)" 0
}

@test "the chain written for sh(1) behaves the same" {
	touch "$MARKER"
	run -0 --separate-stderr sh -c '
		crd-detect --config "$1" --format json &&
		crd-window --config "$1" --format json --at "$2" &&
		crd-gate --config "$1" --format json &&
		crd-reboot --config "$1" --format json' sh "$CONFIG" "$AT"
	assert_equal "$(reboot_calls)" 1
}
