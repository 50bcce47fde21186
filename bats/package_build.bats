#!/usr/bin/env bats
# The binaries inside every .deb and .rpm were built as `make build` builds
# them: every one with Go's defaults, no GOEXPERIMENT and no DefaultGODEBUG
# override (docs/decisions.md). bats/build.bats checks bin/.

load ../packaging/test/lib

# settings FILE: the build settings Go recorded in FILE.
settings() { go version -m "$1" | awk '$1 == "build" { print $2 }'; }

# check_tree DIR: the binaries under DIR/usr/bin.
check_tree() {
	local t s
	for t in crd-detect crd-window crd-gate crd-reboot clusterrebootd crd-lock; do
		s=$(settings "$1/usr/bin/$t") || fail "go version -m $1/usr/bin/$t failed"
		! grep -q 'GOEXPERIMENT=\|DefaultGODEBUG=' <<<"$s" || fail "$t in $2: not Go's defaults: $s"
	done
}

@test "every package's binaries are built with Go's defaults" {
	local pkg dir n=0
	for pkg in "$PKG_DIST"/*.deb "$PKG_DIST"/*.rpm; do
		[ -f "$pkg" ] || continue
		dir=$(mktemp -d "$BATS_TEST_TMPDIR/x.XXXX")
		case $pkg in
		*.deb) dpkg-deb -x "$pkg" "$dir" ;;
		*.rpm) rpm2cpio "$pkg" | (cd "$dir" && cpio -idm --quiet --no-absolute-filenames) ;;
		esac
		check_tree "$dir" "$(basename "$pkg")"
		n=$((n + 1))
	done
	[ "$n" -eq 4 ] || fail "want 4 packages (deb and rpm, amd64 and arm64) in $PKG_DIST, found $n"
}
