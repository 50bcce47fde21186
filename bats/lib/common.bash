# shellcheck shell=bash
# common.bash: what every bats suite here shares. In a .bats file:
#
#   load lib/common
#   setup() { common_setup; }
#
# common_setup puts the tools under test first on PATH (bin/ of this checkout,
# or $CLUSTERREBOOTD_BIN_DIR, e.g. /usr/bin for an installed package), removes
# every CRD_* variable of the caller (the tools read them as flags) and points
# CRD_CONFIG at a missing file so that no test reads /etc/clusterrebootd.
# Each test gets its own directory $TEST_DIR (bats removes it afterwards).
#
# Helpers:
#   crd_config                 write a hermetic config to $TEST_DIR/etc/config.yaml ($CONFIG)
#   crd_config_dropin NAME     YAML on stdin -> $TEST_DIR/etc/config.d/NAME.yaml (overrides keys)
#   health_script_exits N      make the health script exit N
#   reboot_calls               how often the recording reboot command ran
#   json_field PATH [JSON]     a field of the last JSON object in JSON (default $output)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

bats_require_minimum_version 1.5.0

BATS_LIB_PATH="$REPO_ROOT/.tools/npm/node_modules${BATS_LIB_PATH:+:$BATS_LIB_PATH}"
bats_load_library bats-support
bats_load_library bats-assert

# The tools every suite expects on PATH.
CRD_TOOLS=(crd-detect crd-window crd-gate crd-reboot)

common_setup() {
	local v t bin_dir=${CLUSTERREBOOTD_BIN_DIR:-$REPO_ROOT/bin}
	for v in $(compgen -e); do
		case "$v" in CRD_*) unset "$v" ;; esac
	done
	for t in "${CRD_TOOLS[@]}"; do
		[[ -x "$bin_dir/$t" ]] || fail "$bin_dir/$t is missing: run 'make build' (or set CLUSTERREBOOTD_BIN_DIR)"
	done
	PATH="$bin_dir:$PATH"
	TEST_DIR="$BATS_TEST_TMPDIR"
	export CRD_CONFIG="$TEST_DIR/no-such-config.yaml"
	cd "$TEST_DIR" || return 1
}

# crd_config writes a configuration that touches nothing outside $TEST_DIR:
#   reboot_required_detectors  one file detector on $MARKER (absent: no reboot needed)
#   health_script              $TEST_DIR/health.sh, exits 0 (see health_script_exits)
#   reboot_command             $TEST_DIR/reboot.sh, appends one line to $REBOOT_CALLS
#   kill_switch_file           $KILL_SWITCH (absent)
#   state_dir, run_dir         under $TEST_DIR
#   windows                    none (always open), timezone UTC
# and exports CONFIG. Change single keys with crd_config_dropin.
crd_config() {
	local etc="$TEST_DIR/etc"
	CONFIG="$etc/config.yaml"
	MARKER="$TEST_DIR/reboot-required"
	KILL_SWITCH="$TEST_DIR/disable"
	REBOOT_CALLS="$TEST_DIR/reboot-calls"
	export CONFIG MARKER KILL_SWITCH REBOOT_CALLS
	mkdir -p "$etc/config.d" "$TEST_DIR/state" "$TEST_DIR/run"

	health_script_exits 0
	cat >"$TEST_DIR/reboot.sh" <<-EOF
		#!/bin/sh
		# Stands in for the real reboot: records that (and how) it was called.
		echo "reboot \$*" >>"$REBOOT_CALLS"
	EOF
	chmod 755 "$TEST_DIR/reboot.sh"

	cat >"$CONFIG" <<-EOF
		node_name: "bats-node"
		reboot_required_detectors:
		  - type: file
		    path: "$MARKER"
		health_script: "$TEST_DIR/health.sh"
		health_timeout_sec: 10
		reboot_command: ["$TEST_DIR/reboot.sh", "now"]
		kill_switch_file: "$KILL_SWITCH"
		state_dir: "$TEST_DIR/state"
		run_dir: "$TEST_DIR/run"
		windows:
		  timezone: "UTC"
	EOF
}

# crd_config_dropin NAME: the YAML on stdin becomes config.d/NAME.yaml next to
# $CONFIG; the keys it names replace those of config.yaml (lists whole).
crd_config_dropin() {
	cat >"$(dirname "$CONFIG")/config.d/$1.yaml"
}

# health_script_exits N: the health script prints a line and exits N.
health_script_exits() {
	cat >"$TEST_DIR/health.sh" <<-EOF
		#!/bin/sh
		echo "health.sh: exiting $1"
		exit $1
	EOF
	chmod 755 "$TEST_DIR/health.sh"
}

# reboot_calls prints how often the reboot command ran (0 when never).
reboot_calls() {
	if [[ -f "$REBOOT_CALLS" ]]; then
		wc -l <"$REBOOT_CALLS" | tr -d ' '
	else
		echo 0
	fi
}

# json_field PATH [JSON]: print PATH (a jq path; the leading dot may be left
# out: exit_name, .error, detectors[0].name) of the LAST JSON object in JSON,
# default $output. Use `run --separate-stderr` so $output is stdout alone. With
# several tools chained, the last object is the one of the tool that stopped
# the chain. Fails when there is no JSON object.
json_field() {
	local path=$1 json=${2-$output}
	[[ $path == .* ]] || path=".$path"
	jq -rs "if length == 0 then error(\"no JSON object\") else last | $path end" <<<"$json"
}
