#!/usr/bin/env bats
# The .rpm installed with rpm --root into a Debian root (its scriptlets run
# chrooted there): install, upgrade with a modified %config(noreplace) and a
# kill switch, erase. --nodeps: that root's rpm database does not know the
# dpkg-installed systemd. Tests run in order.

load ../packaging/test/lib

setup_file() {
	export R="$BATS_FILE_TMPDIR/root"
	extract_root "$R"
	build_old_package "$BATS_FILE_TMPDIR/old"
	export OLD="$BATS_FILE_TMPDIR/old/clusterrebootd-${PKG_VERSION}~old-1.x86_64.rpm"
}

rpm_root() { with_proc "$R" rpm --root "$R" --dbpath /var/lib/rpm "$@"; }

@test "rpm install: scriptlets run, files in place, service not enabled" {
	mkdir -p "$R/etc/clusterrebootd"
	echo "frozen" >"$R/etc/clusterrebootd/disable"
	run rpm_root -i --nodeps "$OLD"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"systemctl enable --now clusterrebootd.service"* ]]
	run rpm_root -q clusterrebootd
	[ "$output" = "clusterrebootd-${PKG_VERSION}~old-1.x86_64" ]
	for tool in clusterrebootd crd-detect crd-window crd-gate crd-lock crd-reboot; do
		[ -x "$R/usr/bin/$tool" ]
		[ -s "$R/usr/share/bash-completion/completions/$tool" ]
		[ "$(sed -n 1p "$R/usr/share/zsh/site-functions/_$tool")" = "#compdef $tool" ]
		[ -s "$R/usr/share/fish/vendor_completions.d/$tool.fish" ]
	done
	[ -f "$R/usr/lib/systemd/system/clusterrebootd.service" ]
	[ -f "$R/usr/lib/systemd/system/clusterrebootd.service.d/needs-restarting.conf" ]
	[ ! -e "$R/lib/systemd/system/clusterrebootd.service" ] || [ -L "$R/lib" ]
	rpm -qpl "$OLD" | { ! grep -q lintian; }
	[ -d "$R/etc/clusterrebootd/config.d" ]
	[ "$(stat -c '%a %U' "$R/run/clusterrebootd")" = "750 root" ]
	[ "$(cat "$R/etc/clusterrebootd/disable")" = "frozen" ]
	run rpm_root -q --configfiles clusterrebootd
	[ "$output" = "/etc/clusterrebootd/config.yaml" ]
	run rpm_root -q --recommends clusterrebootd
	[[ "$output" == *"(dnf-utils or yum-utils)"* ]]
}

@test "rpm upgrade: modified config kept (new template as .rpmnew), kill switch kept" {
	echo "# changed by the operator" >>"$R/etc/clusterrebootd/config.yaml"
	cp "$(rpm_x86_64)" "$R/tmp/new.rpm"
	run rpm_root -U --nodeps "$(rpm_x86_64)"
	echo "$output"
	[ "$status" -eq 0 ]
	run rpm_root -q clusterrebootd
	[ "$output" = "clusterrebootd-${PKG_VERSION}-1.x86_64" ]
	[ "$(tail -1 "$R/etc/clusterrebootd/config.yaml")" = "# changed by the operator" ]
	cmp "$R/etc/clusterrebootd/config.yaml.rpmnew" "$PKG_ROOT/packaging/config.yaml"
	[ "$(cat "$R/etc/clusterrebootd/disable")" = "frozen" ]
}

@test "rpm erase: binaries go, modified config saved as .rpmsave, kill switch stays" {
	run rpm_root -e --nodeps clusterrebootd
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$R/usr/bin/clusterrebootd" ]
	[ ! -e "$R/usr/lib/systemd/system/clusterrebootd.service" ]
	[ "$(tail -1 "$R/etc/clusterrebootd/config.yaml.rpmsave")" = "# changed by the operator" ]
	[ -f "$R/etc/clusterrebootd/disable" ]
}
