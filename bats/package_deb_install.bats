#!/usr/bin/env bats
# The .deb in a real Debian root (debootstrap, cached): install, upgrade with
# a modified conffile and a kill switch, remove, purge. bats runs the tests
# of a file in order; each step builds on the previous one.

load ../packaging/test/lib

setup_file() {
	export R="$BATS_FILE_TMPDIR/root"
	extract_root "$R"
	build_old_package "$BATS_FILE_TMPDIR/old"
	cp "$BATS_FILE_TMPDIR/old/clusterrebootd_${PKG_VERSION}~old_amd64.deb" "$R/tmp/old.deb"
	cp "$(deb_amd64)" "$R/tmp/new.deb"
}

in_root() { with_proc "$R" chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
pkg_status() { in_root dpkg-query -W -f '${db:Status-Abbrev}${Version}' clusterrebootd 2>/dev/null || true; }

@test "install: an existing kill switch survives, files land where PRD §9.1 says" {
	mkdir -p "$R/etc/clusterrebootd"
	echo "maintenance until Monday" >"$R/etc/clusterrebootd/disable"

	run in_root dpkg -i /tmp/old.deb
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"systemctl enable --now clusterrebootd.service"* ]]
	[ "$(pkg_status)" = "ii ${PKG_VERSION}~old" ]

	[ "$(cat "$R/etc/clusterrebootd/disable")" = "maintenance until Monday" ]
	for tool in clusterrebootd crd-detect crd-window crd-gate crd-lock crd-reboot; do
		[ "$(stat -c '%a %U' "$R/usr/bin/$tool")" = "755 root" ]
		ls "$R"/usr/share/man/man[18]/"$tool".[18].gz
		# Completions generated from the command tree, where Debian's shells look.
		grep "^complete .*-F .* $tool\$" "$R/usr/share/bash-completion/completions/$tool" >/dev/null
		[ "$(sed -n 1p "$R/usr/share/zsh/vendor-completions/_$tool")" = "#compdef $tool" ]
		grep "^complete -c $tool" "$R/usr/share/fish/vendor_completions.d/$tool.fish" >/dev/null
	done
	ls "$R"/usr/share/man/man5/clusterrebootd.yaml.5.gz
	[ -f "$R/etc/clusterrebootd/config.yaml" ]
	[ -d "$R/etc/clusterrebootd/config.d" ]
	grep -qx /etc/clusterrebootd/config.yaml "$R/var/lib/dpkg/info/clusterrebootd.conffiles"
	[ -f "$R/lib/systemd/system/clusterrebootd.service" ]
	[ -f "$R/usr/lib/tmpfiles.d/clusterrebootd.conf" ]
	[ -f "$R/usr/share/doc/clusterrebootd/copyright" ]
	[ -f "$R/usr/share/doc/clusterrebootd/changelog.Debian.gz" ]
	[ -f "$R/usr/share/doc/clusterrebootd/config.yaml" ]
	[ "$(stat -c '%a %U' "$R/usr/share/clusterrebootd/clusterrebootd-dashboard.json")" = "644 root" ]
	[ "$(stat -c '%a %U' "$R/usr/share/clusterrebootd/clusterrebootd-alerts.yaml")" = "644 root" ]
	[ "$(stat -c '%a %U' "$R/usr/share/clusterrebootd/etcd-rbac.sh")" = "755 root" ]
	"$R/usr/share/clusterrebootd/etcd-rbac.sh" --print node-1 | grep '^etcdctl role add clusterrebootd-node-node-1$' >/dev/null
	# postinst ran systemd-tmpfiles --create.
	[ "$(stat -c '%a %U' "$R/run/clusterrebootd")" = "750 root" ]
	# Installed, never enabled or started.
	[ ! -e "$R/etc/systemd/system/multi-user.target.wants/clusterrebootd.service" ]
}

@test "systemd-analyze verify accepts the installed unit without a single warning" {
	run systemd-analyze verify --man=no --root="$R" /lib/systemd/system/clusterrebootd.service
	echo "$output"
	[ "$status" -eq 0 ]
	[ -z "$output" ] || fail "any output of systemd-analyze verify counts as a failure"
}

@test "upgrade: a modified config, a drop-in and the kill switch are kept" {
	echo "# changed by the operator" >>"$R/etc/clusterrebootd/config.yaml"
	echo "node_name: node-7" >"$R/etc/clusterrebootd/config.d/10-node.yaml"

	run in_root dpkg --force-confdef --force-confold -i /tmp/new.deb
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(pkg_status)" = "ii ${PKG_VERSION}" ]
	[[ "$output" == *"upgraded from ${PKG_VERSION}~old"* ]]

	[ "$(tail -1 "$R/etc/clusterrebootd/config.yaml")" = "# changed by the operator" ]
	# dpkg saw the new template and put it beside the kept one.
	cmp "$R/etc/clusterrebootd/config.yaml.dpkg-dist" "$PKG_ROOT/packaging/config.yaml"
	[ "$(cat "$R/etc/clusterrebootd/config.d/10-node.yaml")" = "node_name: node-7" ]
	[ "$(cat "$R/etc/clusterrebootd/disable")" = "maintenance until Monday" ]
}

@test "remove: binaries, unit and docs go, configuration and kill switch stay" {
	run in_root dpkg -r clusterrebootd
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(pkg_status)" = "rc ${PKG_VERSION}" ]
	for path in usr/bin/clusterrebootd usr/bin/crd-lock lib/systemd/system/clusterrebootd.service \
		usr/lib/tmpfiles.d/clusterrebootd.conf usr/share/doc/clusterrebootd usr/share/man/man8/clusterrebootd.8.gz; do
		[ ! -e "$R/$path" ] || fail "$path is still there after remove"
	done
	[ -f "$R/etc/clusterrebootd/config.yaml" ]
	[ -f "$R/etc/clusterrebootd/config.d/10-node.yaml" ]
	[ -f "$R/etc/clusterrebootd/disable" ]
	# Nothing but configuration is left registered.
	run in_root dpkg-query -L clusterrebootd
	echo "$output"
	[ "$(echo "$output" | grep -v '^/etc')" = "" ]
	[[ "$output" == *"/etc/clusterrebootd/config.yaml"* ]]
}

@test "purge: configuration, drop-ins, kill switch and state are gone" {
	mkdir -p "$R/var/lib/clusterrebootd" && touch "$R/var/lib/clusterrebootd/reboot-marker"
	run in_root dpkg -P clusterrebootd
	echo "$output"
	[ "$status" -eq 0 ]
	[ -z "$(pkg_status)" ] || [[ "$(pkg_status)" == un* ]]
	[ ! -e "$R/etc/clusterrebootd" ]
	[ ! -e "$R/var/lib/clusterrebootd" ]
	[ ! -e "$R/run/clusterrebootd" ]
}
