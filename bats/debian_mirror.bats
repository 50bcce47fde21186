#!/usr/bin/env bats
# scripts/debian-mirror, which gives mk/package.mk's debootstrap the host's own
# apt source for the suite (one-line and deb822 files, where apt-config says
# they are), skipping security and backports archives.

load lib/common

MIRROR="$REPO_ROOT/scripts/debian-mirror"

setup() {
	ETC="$BATS_TEST_TMPDIR/etc"
	mkdir -p "$ETC/sources.list.d" "$ETC/apt.conf.d"
	printf 'Dir::Etc "%s/";\n' "$ETC" >"$BATS_TEST_TMPDIR/apt.conf"
	export APT_CONFIG="$BATS_TEST_TMPDIR/apt.conf"
}

@test "a one-line sources.list: the main archive, not the security one before it" {
	printf '%s\n' 'deb [signed-by=/k.gpg] http://mirror.example/debian-security bookworm-security main' \
		'deb http://mirror.example/debian bookworm main' >"$ETC/sources.list"
	run -0 "$MIRROR" bookworm
	assert_output http://mirror.example/debian
}

@test "a deb822 .sources file, last stanza without a blank line after it" {
	printf '%s\n' 'Types: deb' 'URIs: http://security.example/debian-security' 'Suites: bookworm-security' '' \
		'Types: deb deb-src' 'URIs: http://snapshot.example/archive/debian/20250520T000000Z' \
		'Suites: bookworm bookworm-updates' >"$ETC/sources.list.d/debian.sources"
	run -0 "$MIRROR" bookworm
	assert_output http://snapshot.example/archive/debian/20250520T000000Z
}

@test "no source for the suite: deb.debian.org" {
	printf '%s\n' 'deb http://mirror.example/debian bookworm main' >"$ETC/sources.list"
	run -0 "$MIRROR" trixie
	assert_output http://deb.debian.org/debian
}
