#!/usr/bin/env bats
# The systemd unit and tmpfiles.d entry, hardened. (systemd-analyze verify
# needs a whole system: bats/package_deb_install.bats runs it in the chroot.)

load ../packaging/test/lib

setup_file() {
	export UNIT_ROOT="$BATS_FILE_TMPDIR/root"
	mkdir -p "$UNIT_ROOT"
	dpkg-deb -x "$(deb_amd64)" "$UNIT_ROOT"
}

@test "systemd-analyze security rates the unit's exposure at 2.5 or better" {
	run systemd-analyze security --offline=true --root="$UNIT_ROOT" clusterrebootd.service
	[ "$status" -eq 0 ]
	score=$(echo "$output" | sed -n 's/.*Overall exposure level for clusterrebootd.service: \([0-9.]*\).*/\1/p')
	echo "exposure: $score" >&3
	[ -n "$score" ]
	awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }'
}

@test "the sandbox keeps reboot(2) out and CAP_SYS_BOOT in for logind" {
	unit="$UNIT_ROOT/lib/systemd/system/clusterrebootd.service"
	grep -qx 'SystemCallFilter=~@privileged' "$unit"
	grep -qx 'CapabilityBoundingSet=CAP_SYS_BOOT' "$unit"
	grep -qx 'NoNewPrivileges=yes' "$unit"
	grep -qx 'ExecStart=/usr/bin/clusterrebootd run --config /etc/clusterrebootd/config.yaml' "$unit"
	grep -qx 'Type=notify' "$unit"
	grep -qx 'Restart=always' "$unit"
}

@test "systemctl reload validates the configuration before it signals the daemon" {
	unit="$UNIT_ROOT/lib/systemd/system/clusterrebootd.service"
	run grep '^ExecReload=' "$unit"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 'ExecReload=/usr/bin/clusterrebootd validate-config --config /etc/clusterrebootd/config.yaml --format text' ]
	[ "${lines[1]}" = "ExecReload=/bin/sh -c 'kill -HUP \"\$MAINPID\"'" ]
	[ "${#lines[@]}" -eq 2 ]
}

@test "tmpfiles.d creates /run/clusterrebootd 0750 root in a scratch root" {
	run systemd-tmpfiles --create --root="$UNIT_ROOT" clusterrebootd.conf
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c '%a %U' "$UNIT_ROOT/run/clusterrebootd")" = "750 root" ]
	[ "$(stat -c '%a %U' "$UNIT_ROOT/var/lib/clusterrebootd")" = "750 root" ]
}

@test "the unit can write node_exporter's textfile directories and bounds its resources" {
	unit="$UNIT_ROOT/lib/systemd/system/clusterrebootd.service"
	grep -qx 'ReadWritePaths=-/var/lib/prometheus/node-exporter -/var/lib/node_exporter/textfile' "$unit"
	grep -qx 'MemoryHigh=256M' "$unit"
	grep -qx 'CPUWeight=20' "$unit"
	run grep -c '^MemoryMax=' "$unit"
	[ "$output" = 0 ]
}
