#!/usr/bin/env bats
# The ledger of make e2e-vm (bats/lib/vm.bash) on made-up records: each check
# the VM scenarios rely on fails when its property is broken. No VM runs here.

load lib/common
load lib/vm

setup() {
	common_setup
	VM_DIR=$BATS_TEST_TMPDIR/run
	VM_NODES=(a1 a2 a3)
	mkdir -p "$VM_DIR"/{a1,a2,a3}
}

# events NAME LINE...: NAME's ledger port as the host recorded it.
events() {
	local n=$1
	shift
	printf '%s\n' "$@" >"$VM_DIR/$n/ledger.raw"
}

@test "vm ledger: reboots one at a time pass the ledger check" {
	events a1 "100.0 up b0 6.1.0-50-cloud-amd64" "110.0 down b0" "150.0 up b1 6.1.0-57-cloud-amd64"
	events a2 "101.0 up c0 6.1.0-50-cloud-amd64" "160.0 down c0" "200.0 up c1 6.1.0-57-cloud-amd64"
	events a3 "102.0 up d0 6.1.0-50-cloud-amd64" "210.0 down d0" "250.0 up d1 6.1.0-57-cloud-amd64"
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	run -0 cat "$BATS_TEST_TMPDIR/ledger"
	assert_line "a1 down 110.0"
	assert_line "a1 up 150.0"
	# The first boot's "up" opens nothing.
	refute_line "a1 up 100.0"
	run -0 "$REPO_ROOT/scripts/e2e-ledger-check" --max 1 --expect 3 "$BATS_TEST_TMPDIR/ledger"
	assert_output --partial "never more than 1 down at once: OK"
	run -0 vm_lost_exactly "$BATS_TEST_TMPDIR/ledger" ""
	assert_equal "$(vm_kernel_up a2)" 6.1.0-57-cloud-amd64
}

@test "vm ledger: two VMs down at once fail the ledger check" {
	events a1 "110.0 down b0" "150.0 up b1 k"
	events a2 "140.0 down c0" "200.0 up c1 k"
	events a3 "210.0 down d0" "250.0 up d1 k"
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	run -1 "$REPO_ROOT/scripts/e2e-ledger-check" --max 1 --expect 3 "$BATS_TEST_TMPDIR/ledger"
	assert_output --partial "OVERLAP"
	assert_output --partial "2 nodes down at once (max 1): "
}

@test "vm ledger: a killed VM is down from its kill and lost; the one lost is found, any other is not" {
	events a1 "100.0 up b0 k" "110.0 down b0"
	events a2 "101.0 up c0 k"
	events a3 "102.0 up d0 k"
	echo 115.5 >"$VM_DIR/a1/killed"
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	run -0 cat "$BATS_TEST_TMPDIR/ledger"
	assert_output $'a1 down 110.0\na1 lost 115.5'
	run -0 vm_lost_exactly "$BATS_TEST_TMPDIR/ledger" a1
	run -1 vm_lost_exactly "$BATS_TEST_TMPDIR/ledger" a2
	# Killed while up: down at the kill.
	events a2 "101.0 up c0 k"
	echo 300 >"$VM_DIR/a2/killed"
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	run -0 grep '^a2 ' "$BATS_TEST_TMPDIR/ledger"
	assert_output $'a2 down 300\na2 lost 300'
	run -1 vm_lost_exactly "$BATS_TEST_TMPDIR/ledger" a1
	assert_output --partial "a1 a2"
}

@test "vm ledger: no other reboot after the lost VM went down; one after it fails" {
	events a1 "110.0 down b0"
	events a2 "101.0 up c0 k"
	events a3 "102.0 up d0 k"
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	run -0 vm_no_down_after "$BATS_TEST_TMPDIR/ledger" a1 110.0
	# a3 rebooted after a1's slot expired: the rollout did not halt.
	events a3 "102.0 up d0 k" "240.0 down d0" "300.0 up d1 k"
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	run -1 vm_no_down_after "$BATS_TEST_TMPDIR/ledger" a1 110.0
	assert_output --partial "a3 went down at 240.0"
	# ... but not within a window that ends before.
	run -0 vm_no_down_after "$BATS_TEST_TMPDIR/ledger" a1 110.0 200
	# The slot-expiry form of the ledger check lets the rollout go on
	# after a lost node; without it the lost node stays down and overlaps.
	run -0 "$REPO_ROOT/scripts/e2e-ledger-check" --slot-ttl 120 "$BATS_TEST_TMPDIR/ledger"
	run -1 "$REPO_ROOT/scripts/e2e-ledger-check" "$BATS_TEST_TMPDIR/ledger"
}

@test "vm ledger: QEMU's RESET events and the host's slot watch are read" {
	cat >"$VM_DIR/a1/qmp.log" <<-'EOF'
		{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": ["oob"]}}
		{"return": {}}
		{"timestamp": {"seconds": 1764640000, "microseconds": 42}, "event": "RESET", "data": {"guest": true, "reason": "guest-reset"}}
	EOF
	run -0 vm_resets a1
	assert_output 1764640000.000042
	# A reboot between down and up passes; one outside, or none, fails.
	run -0 vm_resets_within a1 1764639990 1764640100
	run -1 vm_resets_within a1 1764640001 1764640100
	assert_output --partial "outside"
	run -1 vm_resets_within a2 0 9999999999
	assert_output --partial "never reset a2"
	local k1 k2
	k1=$(printf %s /e2e/clusterrebootd/rebooting/a1 | base64)
	k2=$(printf %s /e2e/clusterrebootd/rebooting/a2 | base64)
	printf '%s\n' "200.5 {\"Header\":{},\"Events\":[{\"kv\":{\"key\":\"$k1\",\"value\":\"e30=\"}}]}" \
		"260.1 {\"Header\":{},\"Events\":[{\"type\":1,\"kv\":{\"key\":\"$k1\"}}]}" \
		"261.0 {\"Header\":{},\"Events\":[{\"kv\":{\"key\":\"$k2\"}}]}" >"$VM_DIR/slots.raw"
	vm_slots "$BATS_TEST_TMPDIR/slots"
	run -0 cat "$BATS_TEST_TMPDIR/slots"
	assert_output $'200.5 put a1\n260.1 delete a1\n261.0 put a2'
}
