#!/usr/bin/env bats
# On real VMs (make e2e-vm; root): fleets of three Debian 12 VMs with their
# own kernel and GRUB (bats/lib/vm.bash), clusterrebootd installed from its
# .deb, a 3-member etcd with TLS in the test's network namespace, a real
# kernel upgrade from the mirror and the package's `systemctl reboot`.
# Every ledger is the host's: what the VMs wrote to their serial ports, with
# the host's arrival times, QEMU's events and etcd's own record of the slots.
# docs/e2e.md, "On real VMs", says what each scenario proves.

load ../lib/common
load ../lib/vm

setup_file() { vm_setup_file; }

setup() { vm_init; }

teardown() {
	if [[ -z "${BATS_TEST_COMPLETED:-}" ]]; then
		vm_diag >&2
		vm_keep_logs "$REPO_ROOT/build/e2e-vm/failed/$(date +%Y%m%dT%H%M%S)-$BATS_TEST_NUMBER"
	fi
	vm_stop_all
}

# fleet CONFIG NAME...: a 3-member etcd and the VMs NAME..., each with
# CONFIG as its test drop-in, booted, provisioned and up (their first
# boot's "up").
fleet() {
	local cfg=$1 n
	shift
	vm_etcd_start 3
	for n in "$@"; do vm_add "$n" "$cfg"; done
	vm_start "$@"
	vm_provision "$@"
	for n in "$@"; do vm_wait_ledger "$n" up 600 >/dev/null; done
}

# ledger_ok [CHECK-ARGS...]: the fleet's ledger, printed, and the check.
ledger_ok() {
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	cat "$BATS_TEST_TMPDIR/ledger"
	run -0 "$REPO_ROOT/scripts/e2e-ledger-check" "$@" "$BATS_TEST_TMPDIR/ledger"
	echo "$output"
	grep -E '^(rollout:|never more than)' <<<"$output" | sed 's/^/# /' >&3
}

# one_real_reboot NAME: NAME went down once and came back once on the new
# kernel with another boot id, QEMU reset it once in between, and its
# daemon completed the reboot by freeing its slot.
one_real_reboot() {
	local n=$1 down up
	down=$(vm_events "$n" | awk '$2 == "down" { print $1 }')
	up=$(vm_events "$n" | awk -v d="$down" '$2 == "up" && $1 > d { print $1 }')
	echo "$n: down $down, up $up on $(vm_kernel_up "$n")"
	assert_equal "$(wc -w <<<"$down")" 1
	assert_equal "$(wc -w <<<"$up")" 1
	vm_resets_within "$n" "$down" "$up"
	assert_equal "$(vm_kernel_up "$n")" "$VM_KERNEL_NEW"
	[[ "$(vm_events "$n" | awk '$2 == "down" { print $3 }')" != "$(vm_events "$n" | awk -v u="$up" '$1 == u { print $3 }')" ]]
	run -0 vm_ssh "$n" 'journalctl -u clusterrebootd -b -o cat | grep "\"event\":\"reboot_completed\""'
	assert_equal "$(wc -l <<<"$output")" 1
	assert_output --partial '"slot_freed":true'
}

# slots_one_at_a_time FILE: etcd's slots, as the host watched them, never
# held by two nodes at once; each node's slot spans its down and up.
slots_one_at_a_time() {
	vm_slots "$1"
	cat "$1"
	awk '$2 == "put" { if (held != "" && held != $3) { print "two slots at once: " held " and " $3; bad = 1 } held = $3 }
		$2 == "delete" && $3 == held { held = "" }
		END { exit bad }' "$1"
	local n put del down up
	for n in "${VM_NODES[@]}"; do
		put=$(awk -v n="$n" '$2 == "put" && $3 == n && !f { print $1; f = 1 }' "$1")
		del=$(awk -v n="$n" '$2 == "delete" && $3 == n { print $1 }' "$1" | tail -n 1)
		down=$(vm_events "$n" | awk '$2 == "down" && !f { print $1; f = 1 }')
		up=$(vm_events "$n" | awk -v d="$down" '$2 == "up" && $1 > d && !f { print $1; f = 1 }')
		echo "$n: slot $put .. $del, down $down .. up $up"
		awk -v p="$put" -v d="$down" -v u="$up" -v x="$del" 'BEGIN { exit !(p < d && d < u && u < x) }'
	done
}

@test "vm scenario A: three VMs get the new kernel by dpkg -i; they reboot one at a time into it, each slot freed after its post-reboot checks" {
	fleet "" a1 a2 a3
	vm_install_kernel a1 a2 a3
	local n
	for n in a1 a2 a3; do vm_wait_dpkg "$n" 1800; done
	vm_wait_kernel 3600 a1 a2 a3

	ledger_ok --max 1 --expect 3
	for n in a1 a2 a3; do
		one_real_reboot "$n"
		# Never in its own package transaction: down after the boot menu.
		local grub down
		grub=$(vm_events "$n" | awk '$2 == "grub-done" && !f { print $1; f = 1 }')
		down=$(vm_events "$n" | awk '$2 == "down" && !f { print $1; f = 1 }')
		awk -v g="$grub" -v d="$down" 'BEGIN { exit !(g != "" && g < d) }'
	done
	slots_one_at_a_time "$BATS_TEST_TMPDIR/slots"

	# What an operator sees: nothing needed, no slot, no holder.
	local status
	status=$(vm_ssh a1 'clusterrebootd status --format json')
	for n in a1 a2 a3; do
		assert_equal "$(jq -r --arg n "$n" '.view.nodes[] | select(.node == $n) | .reboot_required' <<<"$status")" false
	done
	assert_equal "$(jq '.view.rebooting | length' <<<"$status")" 0
	assert_equal "$(jq '.lock.holders | length' <<<"$status")" 0
}

# The lost-VM scenarios (B, C): the first VM's slot runs out because it
# never comes back. reboot_slot_ttl_sec 120 (the minimum is 60: 120 leaves
# the others, slow under emulation, time to end their transactions and
# queue while the slot is held); an observation period of 120 s after it ran out, 24 check
# intervals, in which a rollout that was not halted would have rebooted the
# next VM (it waits under the lock and goes within seconds of the expiry).
LOST_TTL=120
LOST_WATCH=120

# lost_vm_prelude FIRST OTHERS...: every VM installs the kernel with its
# transaction held open: FIRST's with the flag written and the boot menu
# not yet ($LOST_BREAK FIRST runs then, when set), the others' after their
# boot menu (so they finish within a second of their release). FIRST is
# released, finishes and reboots; its "down" time is printed. At that
# moment $LOST_AT_DOWN FIRST runs (when set); then the others are released,
# so they need their reboot while FIRST's slot is held.
lost_vm_prelude() {
	local first=$1 n down
	shift
	vm_hold_transaction "$first"
	for n in "$@"; do vm_hold_transaction "$n" late; done
	vm_install_kernel "$first" "$@"
	vm_wait_ledger "$first" held 1800 >/dev/null
	for n in "$@"; do vm_wait_ledger "$n" held-late 1800 >/dev/null; done
	"${LOST_BREAK:-true}" "$first"
	vm_release_transaction "$first"
	down=$(vm_wait_ledger "$first" down 900)
	"${LOST_AT_DOWN:-true}" "$first"
	for n in "$@"; do vm_release_transaction "$n"; done
	echo "$down"
}

# lost_vm_assertions LOST DOWN OTHERS...: exactly LOST never came back, the
# others waited, and after LOST's slot ran out nobody rebooted: the rollout
# halted on its failure budget (vm_assert_halted).
lost_vm_assertions() {
	local lost=$1 down=$2 n
	shift 2
	for n in "$@"; do vm_wait_dpkg "$n" 900; done
	# The others queue behind the held slot: the one that got the lock waits
	# under it for LOST's slot (slot_waiting, LOST present); the rest, in
	# line for the lock or still in a cycle, go nowhere (the ledger below).
	local waiter="" deadline=$((SECONDS + 120))
	until [[ -n "$waiter" ]]; do
		for n in "$@"; do
			if vm_ssh "$n" "journalctl -u clusterrebootd -b -o cat | grep '\"event\":\"slot_waiting\"' | grep '$lost' >/dev/null"; then
				waiter=$n
				break
			fi
		done
		((SECONDS < deadline)) || fail "no VM waited for $lost's slot within 120 s"
		[[ -n "$waiter" ]] || sleep 2
	done
	echo "$waiter waits under the lock for $lost's slot"
	for n in "$@"; do echo "$n: $(vm_state "$n")"; done
	# Until the slot ran out and for the observation period after it.
	local until
	until=$(awk -v d="$down" -v t="$LOST_TTL" -v w="$LOST_WATCH" 'BEGIN { printf "%.0f", d + t + w }')
	while (($(date +%s) < until)); do sleep 5; done
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	cat "$BATS_TEST_TMPDIR/ledger"
	vm_lost_exactly "$BATS_TEST_TMPDIR/ledger" "$lost"
	run -0 "$REPO_ROOT/scripts/e2e-ledger-check" --max 1 --slot-ttl "$LOST_TTL" "$BATS_TEST_TMPDIR/ledger"
	echo "$output"
	vm_no_down_after "$BATS_TEST_TMPDIR/ledger" "$lost" "$down"
	for n in "$@"; do
		run -0 vm_ssh "$n" uname -r
		assert_output "$VM_KERNEL_OLD"
	done
	vm_assert_halted "$lost"
}

@test "vm scenario B: a VM loses power while it holds its slot; the others wait, then the rollout halts" {
	fleet "reboot_slot_ttl_sec: $LOST_TTL" b1 b2 b3
	local down
	# Power cut while b1 holds its slot, as it goes down for its reboot.
	down=$(LOST_AT_DOWN=vm_kill lost_vm_prelude b1 b2 b3)
	lost_vm_assertions b1 "$down" b2 b3
	# The host saw the cut: QEMU is gone, b1 never wrote "up" again.
	[[ ! -d "/proc/$(cat "$VM_DIR/b1/qemu.pid")" ]]
}

# break_initramfs NAME: while NAME's transaction is held, after its
# initramfs was built and before zz-update-grub: the new kernel's
# initramfs is emptied, so the boot menu's new default cannot find its root
# disk (virtio_blk is a module) and the kernel panics.
break_initramfs() { vm_ssh "$1" "head -c 4096 /dev/zero >/boot/initrd.img-$VM_KERNEL_NEW"; }

@test "vm scenario C: the new kernel does not boot on one VM; the fleet loses exactly that VM and stops" {
	fleet "reboot_slot_ttl_sec: $LOST_TTL" c1 c2 c3
	local down
	down=$(LOST_BREAK=break_initramfs lost_vm_prelude c1 c2 c3)
	lost_vm_assertions c1 "$down" c2 c3
	# The host saw it on the serial console: the new kernel started and
	# panicked; QEMU still runs, the machine never came back.
	run -0 grep -a "Kernel panic - not syncing" "$VM_DIR/c1/console.log"
	[[ -d "/proc/$(cat "$VM_DIR/c1/qemu.pid")" ]]
	vm_resets_within c1 "$down" 9999999999
}

@test "vm scenario D: a VM cut off from etcd while it holds its slot, another while it waits; nobody reboots out of turn, all end on the new kernel" {
	fleet "" d1 d2 d3
	vm_install_kernel d1 d2 d3
	local v first="" deadline=$((SECONDS + 1800))
	until [[ -n "$first" ]]; do
		for v in d1 d2 d3; do
			if [[ -n "$(vm_events "$v" | awk '$2 == "down"')" ]]; then
				first=$v
				break
			fi
		done
		((SECONDS < deadline)) || fail "no VM went down within 1800 s"
		[[ -n "$first" ]] || sleep 2
	done
	local others=() waiter third down
	for v in d1 d2 d3; do [[ "$v" != "$first" ]] && others+=("$v"); done
	waiter=${others[0]} third=${others[1]}
	down=$(vm_wait_ledger "$first" down 10)
	# Cut while it holds its slot, in its reboot.
	vm_cut "$first"
	# Cut while it waits: its transaction done, its daemon queued (waiting).
	vm_wait_dpkg "$waiter" 900
	deadline=$((SECONDS + 300))
	until [[ "$(vm_state "$waiter")" == waiting* ]]; do
		((SECONDS < deadline)) || fail "$waiter did not wait for the lock within 300 s: $(vm_state "$waiter")"
		sleep 2
	done
	vm_cut "$waiter"
	local up
	up=$(vm_wait_ledger "$first" up 900 "$down")
	# Back, but cut off: it cannot free its slot; nobody else goes down.
	sleep 90
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	vm_no_down_after "$BATS_TEST_TMPDIR/ledger" "$first" "$down"
	run -0 vm_ssh "$first" 'test -e /var/lib/clusterrebootd/reboot-marker.json'
	vm_slots "$BATS_TEST_TMPDIR/slots"
	run -1 grep " delete $first\$" "$BATS_TEST_TMPDIR/slots"
	# Healed: it completes; the one that was not cut goes next; the waiter,
	# still cut, does not.
	vm_heal "$first"
	local healed
	healed=$(tail -n 1 "$VM_DIR/$first/healed")
	vm_wait_dpkg "$third" 600
	vm_wait_kernel 1800 "$first" "$third"
	vm_ledger "$BATS_TEST_TMPDIR/ledger"
	run -1 grep "^$waiter down" "$BATS_TEST_TMPDIR/ledger"
	# Healed last: it reboots too.
	vm_heal "$waiter"
	local whealed
	whealed=$(tail -n 1 "$VM_DIR/$waiter/healed")
	vm_wait_kernel 1800 "$waiter"

	ledger_ok --max 1 --expect 3
	for v in d1 d2 d3; do one_real_reboot "$v"; done
	slots_one_at_a_time "$BATS_TEST_TMPDIR/slots"
	# The cut holder's slot was freed only after it could reach etcd again;
	# the cut waiter went down only after it was healed.
	local freed wdown
	freed=$(awk -v n="$first" '$2 == "delete" && $3 == n { print $1 }' "$BATS_TEST_TMPDIR/slots" | tail -n 1)
	wdown=$(vm_events "$waiter" | awk '$2 == "down" && !f { print $1; f = 1 }')
	echo "$first healed $healed, its slot freed $freed; $waiter healed $whealed, down $wdown"
	awk -v h="$healed" -v x="$freed" 'BEGIN { exit !(h < x) }'
	awk -v h="$whealed" -v d="$wdown" 'BEGIN { exit !(h < d) }'
}
