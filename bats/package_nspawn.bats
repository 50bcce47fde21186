#!/usr/bin/env bats
# Boot the cached Debian root with the .deb installed in systemd-nspawn (its
# own PID namespace: a reboot ends the container, never the host) and run,
# under the unit's exact sandbox, the two ways to reboot:
#   - reboot(2) directly (systemctl reboot -ff): must fail with EPERM;
#   - the default reboot_command, /usr/bin/systemctl reboot (D-Bus to
#     logind/systemd): must reboot the container (nspawn exits with 133).

load ../packaging/test/lib

setup_file() {
	command -v systemd-nspawn >/dev/null || skip "systemd-nspawn missing (apt-get install systemd-container)"
	export R="$BATS_FILE_TMPDIR/root"
	extract_root "$R"
	cp "$(deb_amd64)" "$R/tmp/pkg.deb"
	with_proc "$R" chroot "$R" dpkg -i /tmp/pkg.deb >/dev/null
	# Same unit, same sandbox; only the command and the readiness protocol
	# change. Type=exec: the probe does not speak sd_notify.
	mkdir -p "$R/etc/systemd/system/clusterrebootd.service.d"
	cat >"$R/etc/systemd/system/clusterrebootd.service.d/probe.conf" <<'UNIT'
[Service]
Type=exec
WatchdogSec=0
ExecStart=
ExecStart=/bin/sh -c 'exec >/var/lib/clusterrebootd/probe 2>&1; grep -E "^Cap(Eff|Bnd)" /proc/self/status; grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status; /usr/bin/systemctl reboot --force --force; echo "direct-reboot-exit=$?"; exec /usr/bin/systemctl reboot'
UNIT
	ln -sf /lib/systemd/system/clusterrebootd.service "$R/etc/systemd/system/multi-user.target.wants/clusterrebootd.service"
	echo clusterrebootd-test >"$R/etc/hostname"
}

@test "under the unit's sandbox reboot(2) is refused and systemctl reboot works" {
	run timeout 300 systemd-nspawn -D "$R" -b --register=no --keep-unit --private-network --console=pipe
	echo "nspawn exit status: $status"
	cat "$R/var/lib/clusterrebootd/probe"
	# 133: the container rebooted (0 would be a poweroff, 124 a timeout).
	[ "$status" -eq 133 ]
	grep -q '^Seccomp:[[:space:]]*2' "$R/var/lib/clusterrebootd/probe"
	grep -q '^NoNewPrivs:[[:space:]]*1' "$R/var/lib/clusterrebootd/probe"
	# CAP_SYS_BOOT (bit 22) only: 0x400000.
	grep -q '^CapBnd:[[:space:]]*0000000000400000' "$R/var/lib/clusterrebootd/probe"
	grep -q 'direct-reboot-exit=[1-9]' "$R/var/lib/clusterrebootd/probe"
	grep -qi 'not permitted' "$R/var/lib/clusterrebootd/probe"
}
