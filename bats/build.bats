#!/usr/bin/env bats
# How the binaries on test were built (bin/ of this checkout, or the installed
# ones with CLUSTERREBOOTD_BIN_DIR): every one is what `go build` builds, with
# Go's defaults: no GOEXPERIMENT and no DefaultGODEBUG override (no //go:debug
# line in a main package), so what `go test` tests is what ships
# (docs/decisions.md). bats/package_build.bats checks the packages.

load lib/common

setup() {
	common_setup
}

# settings TOOL: the build settings Go recorded in TOOL's binary.
settings() {
	go version -m "$(command -v "$1")" | awk '$1 == "build" { print $2 }'
}

@test "every binary is built with Go's defaults" {
	local t
	for t in "${CRD_TOOLS[@]}" clusterrebootd crd-lock; do
		run settings "$t"
		assert_success
		assert_line "CGO_ENABLED=0"
		refute_line --partial "GOEXPERIMENT="
		refute_line --partial "DefaultGODEBUG="
	done
}
