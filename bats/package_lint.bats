#!/usr/bin/env bats
# lintian on every .deb (no error, no warning: each accepted warning is
# overridden in packaging/deb/lintian-overrides with its reason) and rpmlint
# on every .rpm. rpmlint runs as nobody: as root it would unpack the
# package's absolute cpio paths into the real /.

load ../packaging/test/lib

@test "lintian: every .deb is free of errors and warnings" {
	for deb in "$PKG_DIST"/*.deb; do
		run lintian --fail-on error,warning --tag-display-limit 0 "$deb"
		echo "$deb: $output"
		[ "$status" -eq 0 ]
	done
}

@test "rpmlint: every .rpm is free of errors (as an unprivileged user)" {
	# nobody must reach it: not under bats' private 0700 temp directories.
	home=$(mktemp -d /tmp/crd-rpmlint.XXXXXX)
	chmod 0755 "$home"
	mkdir -p "$home/bin"
	# Second guard: extract without absolute paths even if run as root.
	printf '#!/bin/sh\nexec /usr/bin/cpio --no-absolute-filenames "$@"\n' >"$home/bin/cpio"
	chmod 0755 "$home/bin/cpio"
	cp "$PKG_DIST"/*.rpm "$PKG_ROOT/packaging/rpm/rpmlint.toml" "$home/"
	chown -R nobody "$home"
	for rpm in "$home"/*.rpm; do
		run setpriv --reuid=nobody --regid=nogroup --clear-groups \
			env -i HOME="$home" PATH="$home/bin:/usr/bin:/bin" rpmlint -c "$home/rpmlint.toml" "$rpm"
		echo "$rpm: $output"
		[ "$status" -eq 0 ]
		[[ "$output" == *"1 packages and 0 specfiles checked; 0 errors, 0 warnings"* ]]
	done
	rm -rf "$home"
}
