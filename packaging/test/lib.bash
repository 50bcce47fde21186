# Shared helpers for bats/package_*.bats (run by `make package-test`, which
# exports PKG_DIST, PKG_VERSION, PKG_ROOT and PKG_ROOT_TGZ).

: "${PKG_ROOT:?run through make package-test}"
: "${PKG_DIST:=$PKG_ROOT/dist}"
: "${PKG_VERSION:?}"
: "${PKG_ROOT_TGZ:=$PKG_ROOT/.tools/cache/debian-bookworm-root.tar.gz}"
export PATH="$PKG_ROOT/.tools/bin:$PATH"

deb_amd64() { echo "$PKG_DIST/clusterrebootd_${PKG_VERSION}_amd64.deb"; }
rpm_x86_64() { echo "$PKG_DIST/clusterrebootd-${PKG_VERSION}-1.x86_64.rpm"; }

# fail MESSAGE: end the test with a message on stderr.
fail() {
	echo "$*" >&2
	return 1
}

# extract_root DIR: a fresh copy of the cached Debian root (systemd, dbus).
extract_root() {
	mkdir -p "$1"
	tar -C "$1" --numeric-owner -xzf "$PKG_ROOT_TGZ"
}

# build_old_package OUTDIR: the same tree packaged as VERSION~old with a
# slightly different config template, so an upgrade has to merge conffiles.
build_old_package() {
	local out=$1
	mkdir -p "$out"
	{ cat "$PKG_ROOT/packaging/config.yaml"; echo "# template of the previous release"; } >"$out/config.yaml"
	make --no-print-directory -C "$PKG_ROOT" package PKG_ARCHES=amd64 PKG_BUILD="$out/build" \
		VERSION="${PKG_VERSION}~old" DIST="$out" CONFIG_TEMPLATE="$out/config.yaml" >"$out/build.log" 2>&1 ||
		{ tail -20 "$out/build.log"; return 1; }
}

# with_proc ROOT CMD...: run CMD in a private mount namespace in which
# ROOT/proc is mounted (systemd-tmpfiles needs it); nothing leaks to the host.
with_proc() {
	local root=$1
	shift
	unshare --mount --propagation private --fork \
		sh -c 'mount -t proc proc "$0/proc" && exec "$@"' "$root" "$@"
}
