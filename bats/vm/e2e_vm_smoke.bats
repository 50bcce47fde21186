#!/usr/bin/env bats
# On a real VM (make e2e-vm-smoke, part of make test; root): one Debian 12 VM
# with its own kernel and GRUB (bats/lib/vm.bash) installs a newer kernel
# from the mirror with dpkg -i while clusterrebootd runs from its .deb. The
# package transaction is held open by a kernel hook of the test, after
# Debian's hook wrote /run/reboot-required and before zz-update-grub: the
# detectors say "reboot", the boot menu is not written yet. The daemon must
# not reboot then; once the transaction has finished it reboots with the
# package's `systemctl reboot` into the new kernel and completes.
# docs/e2e.md, "On real VMs", says what each assertion proves.

load ../lib/common
load ../lib/vm

setup_file() { vm_setup_file; }

setup() { vm_init; }

teardown() {
	if [[ -z "${BATS_TEST_COMPLETED:-}" ]]; then
		vm_diag >&2
		vm_keep_logs "$REPO_ROOT/build/e2e-vm/failed/$(date +%Y%m%dT%H%M%S)-smoke"
	fi
	vm_stop_all
}

@test "vm: a kernel upgrade by dpkg; no reboot while its transaction is open; then one real reboot into the new kernel" {
	vm_etcd_start 1
	vm_add v1
	vm_start v1
	vm_provision v1
	local up0
	up0=$(vm_wait_ledger v1 up 300)
	run -0 vm_ssh v1 uname -r
	assert_output "$VM_KERNEL_OLD"
	# Nothing to do yet: exit 1.
	run -1 vm_ssh v1 'crd-detect --format text'

	# The transaction is held open after /run/reboot-required appeared.
	vm_hold_transaction v1
	vm_install_kernel v1
	local held
	held=$(vm_wait_ledger v1 held 1800 "$up0")
	run -0 vm_ssh v1 'test -e /run/reboot-required'
	run -0 vm_ssh v1 "grep -c 'vmlinuz-$VM_KERNEL_NEW' /boot/grub/grub.cfg || true"
	assert_output 0
	# The detectors alone would reboot now: Debian's flag and the kernel.
	run -0 --separate-stderr vm_ssh v1 'crd-detect --format json'
	assert_equal "$(json_field .reboot_required)" true
	assert_output --partial "newest installed $VM_KERNEL_NEW"
	# crd-reboot (the pipeline's last step) refuses: exit 11, naming dpkg's lock.
	run -11 --separate-stderr vm_ssh v1 'crd-reboot --dry-run --format json'
	assert_equal "$(json_field .exit_name)" package_manager_busy
	assert_output --regexp '"path":"/var/lib/dpkg/lock(-frontend)?"'
	# The daemon: blocked at step 2 with package_manager_busy, cycle after
	# cycle (check_interval_sec 5), while the transaction stays open.
	local i status
	for ((i = 0; i < 8; i++)); do
		status=$(vm_ssh v1 'systemctl show -P StatusText clusterrebootd.service')
		echo "StatusText: $status"
		[[ "$status" == "blocked (package_manager_busy)"* ]]
		sleep 5
	done
	run -0 vm_ssh v1 'journalctl -u clusterrebootd -b -o cat | grep -c "\"reason\":\"package_manager_busy\""'
	echo "$output"
	[[ "$output" -ge 1 ]]

	# Released: dpkg runs zz-update-grub and ends; then the reboot.
	vm_release_transaction v1
	local released grub down up
	released=$(vm_wait_ledger v1 released 120 "$held")
	grub=$(vm_wait_ledger v1 grub-done 900 "$held")
	vm_wait_dpkg v1 900
	down=$(vm_wait_ledger v1 down 900 "$held")
	up=$(vm_wait_ledger v1 up 900 "$down")
	vm_wait_kernel 600 v1
	echo "held $held released $released grub-done $grub down $down up $up"
	awk -v h="$held" -v r="$released" -v g="$grub" -v d="$down" -v u="$up" -v k="$VM_KERNEL_NEW" 'BEGIN {
		printf "# transaction held open %.0f s with the flag written; released, the boot menu written %.0f s later, down %.0f s after that, up on %s after %.0f s\n", r - h, g - r, d - g, k, u - d }' >&3
	# Never during the transaction: the machine went down only after the boot
	# menu was written.
	awk -v h="$held" -v r="$released" -v g="$grub" -v d="$down" -v u="$up" 'BEGIN { exit !(h < r && r < g && g < d && d < u) }'

	# A real reboot: QEMU reset the machine between "down" and "up", and at
	# no other time (a reboot is one or two guest-reset events, the
	# kernel's and the firmware's, milliseconds apart).
	vm_resets_within v1 "$down" "$up"
	# Into the new kernel, with another boot id.
	run -0 vm_ssh v1 uname -r
	assert_output "$VM_KERNEL_NEW"
	local boot0 boot1
	boot0=$(vm_events v1 | awk '$2 == "down" && !f { print $3; f = 1 }')
	boot1=$(vm_events v1 | awk -v u="$up" '$1 == u { print $3 }')
	[[ -n "$boot0" && -n "$boot1" && "$boot0" != "$boot1" ]]

	# The ledger: one reboot.
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	cat "$BATS_TEST_TMPDIR/ledger"
	run -0 "$REPO_ROOT/scripts/e2e-ledger-check" --max 1 --expect 1 "$BATS_TEST_TMPDIR/ledger"
	echo "$output"
	grep -E '^(rollout:|never more than)' <<<"$output" | sed 's/^/# /' >&3

	# etcd's record, read by the host: the slot was taken after the transaction
	# ended and freed after the node came back (its post-reboot checks passed).
	vm_slots "$BATS_TEST_TMPDIR/slots"
	cat "$BATS_TEST_TMPDIR/slots"
	local put del
	put=$(awk '$2 == "put" && $3 == "v1" && !f { print $1; f = 1 }' "$BATS_TEST_TMPDIR/slots")
	del=$(awk '$2 == "delete" && $3 == "v1" { print $1 }' "$BATS_TEST_TMPDIR/slots" | tail -n 1)
	[[ -n "$put" && -n "$del" ]]
	awk -v r="$released" -v p="$put" -v d="$down" -v u="$up" -v x="$del" 'BEGIN { exit !(r < p && p < d && u < x) }'

	# The daemon's own record: one reboot, completed; nothing needed any more.
	run -0 vm_ssh v1 'cat /var/lib/clusterrebootd/reboot-history.json'
	assert_equal "$(jq '.reboots | length' <<<"$output")" 1
	assert_equal "$(jq -r '.reboots[0].rebooted' <<<"$output")" true
	assert_equal "$(jq -r '.reboots[0].boot_id' <<<"$output")" "$boot0"
	run -1 vm_ssh v1 'crd-detect --format text'
	run -0 vm_ssh v1 'journalctl -u clusterrebootd -b -o cat | grep -c "\"event\":\"reboot_completed\""'
	assert_output 1
}
