#!/usr/bin/env bats
# make sign with a throwaway OpenPGP key: rpm and deb signatures verify and a
# tampered package fails; SHA256SUMS and its detached signature verify with
# gpgv. The signed packages carry the same payload as the unsigned build.

load ../packaging/test/lib

setup_file() {
	export KEYS="$BATS_FILE_TMPDIR/keys" SIGNED="$BATS_FILE_TMPDIR/signed"
	mkdir -p "$KEYS" "$SIGNED" && chmod 0700 "$KEYS"
	gpg --homedir "$KEYS" --batch --passphrase '' --quick-gen-key \
		'clusterrebootd test signing <test@invalid>' rsa3072 sign never 2>/dev/null
	export FPR=$(gpg --homedir "$KEYS" --with-colons --list-keys | awk -F: '/^fpr/ && !done { print $10; done = 1 }')
	export KEYID=${FPR: -16}
	SHORTID=${FPR: -8}
	export SHORTID=${SHORTID,,}
	gpg --homedir "$KEYS" --batch --armor --export-secret-keys "$FPR" >"$KEYS/private.asc"
	gpg --homedir "$KEYS" --batch --armor --export "$FPR" >"$KEYS/public.asc"
	gpg --homedir "$KEYS" --batch --export "$FPR" >"$KEYS/public.gpg"
	cp "$PKG_DIST"/*.deb "$PKG_DIST"/*.rpm "$SIGNED/"
	make --no-print-directory -C "$PKG_ROOT" sign PKG_ARCHES="amd64 arm64" VERSION="$PKG_VERSION" \
		DIST="$SIGNED" SIGNING_KEY="$KEYS/private.asc" >"$BATS_FILE_TMPDIR/sign.log" 2>&1 ||
		{ cat "$BATS_FILE_TMPDIR/sign.log"; return 1; }
}

# tamper IN OUT: flip one byte near the end of the payload.
tamper() {
	cp "$1" "$2"
	size=$(stat -c %s "$2")
	printf '\xff' | dd of="$2" bs=1 seek=$((size - 100)) conv=notrunc status=none
}

@test "rpm: rpmkeys --checksig accepts the signed rpm and rejects a tampered one" {
	db="$BATS_TEST_TMPDIR/rpmdb"
	mkdir -p "$db"
	rpmkeys --dbpath "$db" --import "$KEYS/public.asc"
	for rpm in "$SIGNED"/*.rpm; do
		run rpmkeys --dbpath "$db" --checksig -v "$rpm"
		echo "$output"
		[ "$status" -eq 0 ]
		[[ "$output" == *"Header V4 RSA/SHA256 Signature, key ID ${SHORTID}: OK"* ]]
	done
	tamper "$SIGNED/clusterrebootd-${PKG_VERSION}-1.x86_64.rpm" "$BATS_TEST_TMPDIR/bad.rpm"
	run rpmkeys --dbpath "$db" --checksig "$BATS_TEST_TMPDIR/bad.rpm"
	echo "$output"
	[ "$status" -ne 0 ]
}

@test "rpm: an unsigned rpm is refused by the same check" {
	db="$BATS_TEST_TMPDIR/rpmdb"
	mkdir -p "$db"
	rpmkeys --dbpath "$db" --import "$KEYS/public.asc"
	run rpmkeys --dbpath "$db" --checksig -v "$(rpm_x86_64)"
	echo "$output"
	[[ "$output" != *"Signature, key ID"*": OK"* ]]
}

@test "deb: debsig-verify with a policy accepts the signed deb and rejects a tampered one" {
	root="$BATS_TEST_TMPDIR/debsig"
	mkdir -p "$root/policies/$KEYID" "$root/keyrings/$KEYID"
	cp "$KEYS/public.gpg" "$root/keyrings/$KEYID/debsig.gpg"
	sed "s/@KEYID@/$KEYID/g" "$PKG_ROOT/packaging/deb/debsig.pol" >"$root/policies/$KEYID/clusterrebootd.pol"
	for deb in "$SIGNED"/*.deb; do
		run debsig-verify --policies-dir "$root/policies" --keyrings-dir "$root/keyrings" "$deb"
		echo "$output"
		[ "$status" -eq 0 ]
	done
	tamper "$SIGNED/clusterrebootd_${PKG_VERSION}_amd64.deb" "$BATS_TEST_TMPDIR/bad.deb"
	run debsig-verify --policies-dir "$root/policies" --keyrings-dir "$root/keyrings" "$BATS_TEST_TMPDIR/bad.deb"
	echo "$output"
	[ "$status" -ne 0 ]
}

@test "signed and unsigned packages carry the same payload (reproducible inside)" {
	for deb in "$PKG_DIST"/*.deb; do
		for member in control.tar.gz data.tar.gz; do
			[ "$(ar p "$deb" $member | sha256sum)" = "$(ar p "$SIGNED/$(basename "$deb")" $member | sha256sum)" ]
		done
		ar t "$SIGNED/$(basename "$deb")" | grep -x _gpgorigin >/dev/null
	done
	for rpm in "$PKG_DIST"/*.rpm; do
		q='%{SHA256HEADER} %{PAYLOADDIGEST}'
		[ "$(rpm -qp --qf "$q" "$rpm")" = "$(rpm -qp --qf "$q" "$SIGNED/$(basename "$rpm")")" ]
	done
}

@test "SHA256SUMS covers every artefact and its signature verifies with gpgv" {
	cd "$SIGNED"
	run sha256sum -c SHA256SUMS
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(wc -l <SHA256SUMS)" -eq "$(ls | grep -cv '^SHA256SUMS')" ]
	run gpgv --keyring "$KEYS/public.gpg" SHA256SUMS.asc SHA256SUMS
	echo "$output"
	[ "$status" -eq 0 ]
	sed 's/^./0/' SHA256SUMS >"$BATS_TEST_TMPDIR/SHA256SUMS"
	run gpgv --keyring "$KEYS/public.gpg" SHA256SUMS.asc "$BATS_TEST_TMPDIR/SHA256SUMS"
	[ "$status" -ne 0 ]
}
