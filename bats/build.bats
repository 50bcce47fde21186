#!/usr/bin/env bats
# How the binaries on test were built (bin/ of this checkout, or the installed
# ones with CLUSTERREBOOTD_BIN_DIR): the settings that make the local tools
# start quickly (docs/performance.md) reach the binaries `make build` and the
# packages ship, and only those.

load lib/common

setup() {
	common_setup
}

# settings TOOL: the build settings Go recorded in TOOL's binary.
settings() {
	go version -m "$(command -v "$1")" | awk '$1 == "build" { print $2 }'
}

@test "the local tools are built for a quick start" {
	local t
	for t in "${CRD_TOOLS[@]}"; do
		run settings "$t"
		assert_success
		assert_line "GOEXPERIMENT=nogreenteagc"
		assert_line "DefaultGODEBUG=containermaxprocs=0,decoratemappings=0,updatemaxprocs=0"
	done
}

@test "the daemon and crd-lock keep Go's defaults" {
	local t
	for t in clusterrebootd crd-lock; do
		run settings "$t"
		assert_success
		refute_line --partial "GOEXPERIMENT="
		refute_line --partial "DefaultGODEBUG="
	done
}
