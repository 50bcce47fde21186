#!/usr/bin/env bats
# scripts/vm-kernels: which two kernels make e2e-vm uses, from what apt says
# the mirror serves (`apt-cache madison` output, here fixed).

load lib/common

KERNELS="$REPO_ROOT/scripts/vm-kernels"

madison() { printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/madison"; }

@test "vm-kernels: the main archive's newest for the image, the security archive's newest of its series for the upgrade" {
	madison \
		'linux-image-6.1.0-47-cloud-amd64 |  6.1.170-3 | http://deb.example/debian bookworm/main amd64 Packages' \
		'linux-image-6.1.0-50-cloud-amd64 |  6.1.176-1 | http://deb.example/debian bookworm/main amd64 Packages' \
		'linux-image-6.1.0-50-cloud-amd64 |  6.1.176-1 | http://deb.example/debian-security bookworm-security/main amd64 Packages' \
		'linux-image-6.1.0-57-cloud-amd64 |  6.1.192-3 | http://deb.example/debian-security bookworm-security/main amd64 Packages' \
		'linux-image-6.1.0-9-cloud-amd64 |  6.1.27-1 | http://deb.example/debian-security bookworm-security/main amd64 Packages' \
		'linux-image-6.12.117+deb12-cloud-amd64 | 6.12.117-1~deb12u1 | http://deb.example/debian-security bookworm-security/main amd64 Packages' \
		'linux-image-6.1.0-57-amd64 |  6.1.192-3 | http://deb.example/debian-security bookworm-security/main amd64 Packages'
	run -0 "$KERNELS" --madison "$BATS_TEST_TMPDIR/madison" bookworm
	assert_output "linux-image-6.1.0-50-cloud-amd64 6.1.176-1 linux-image-6.1.0-57-cloud-amd64 6.1.192-3"
}

@test "vm-kernels: nothing newer anywhere: the main archive's two newest" {
	madison \
		'linux-image-6.1.0-42-cloud-amd64 |  6.1.159-1 | http://deb.example/debian bookworm/main amd64 Packages' \
		'linux-image-6.1.0-47-cloud-amd64 |  6.1.170-3 | http://deb.example/debian bookworm/main amd64 Packages'
	run -0 "$KERNELS" --madison "$BATS_TEST_TMPDIR/madison" bookworm
	assert_output "linux-image-6.1.0-42-cloud-amd64 6.1.159-1 linux-image-6.1.0-47-cloud-amd64 6.1.170-3"
}

@test "vm-kernels: one kernel only, or none in the main archive: exit 1 saying so" {
	madison 'linux-image-6.1.0-47-cloud-amd64 |  6.1.170-3 | http://deb.example/debian bookworm/main amd64 Packages'
	run -1 "$KERNELS" --madison "$BATS_TEST_TMPDIR/madison" bookworm
	assert_output --partial "only one linux-image-*-cloud-amd64"
	madison 'linux-image-6.1.0-57-cloud-amd64 |  6.1.192-3 | http://deb.example/debian-security bookworm-security/main amd64 Packages'
	run -1 "$KERNELS" --madison "$BATS_TEST_TMPDIR/madison" bookworm
	assert_output --partial "main archive serves no"
	: >"$BATS_TEST_TMPDIR/madison"
	run -1 "$KERNELS" --madison "$BATS_TEST_TMPDIR/madison" bookworm
	assert_output --partial "apt knows no"
}

@test "vm scripts: the image, prepare and sweep scripts parse" {
	local s
	for s in vm-image vm-kernels vm-prepare vm-sweep; do
		run -0 sh -n "$REPO_ROOT/scripts/$s"
	done
}
