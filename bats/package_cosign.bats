#!/usr/bin/env bats
# make attest with a throwaway cosign key: every package gets an SBOM and a
# SLSA provenance attestation that verify offline (no network namespace
# access at all) and fail for another artefact.

load ../packaging/test/lib

setup_file() {
	export KEYDIR="$BATS_FILE_TMPDIR/cosign" OUT="$BATS_FILE_TMPDIR/dist"
	mkdir -p "$KEYDIR" "$OUT"
	(cd "$KEYDIR" && COSIGN_PASSWORD='' cosign generate-key-pair >/dev/null 2>&1)
	cp "$PKG_DIST"/*.deb "$PKG_DIST"/*.rpm "$PKG_DIST"/*.cdx.json "$OUT/"
	COSIGN_PASSWORD='' make --no-print-directory -C "$PKG_ROOT" attest VERSION="$PKG_VERSION" \
		DIST="$OUT" COSIGN_KEY="$KEYDIR/cosign.key" >"$BATS_FILE_TMPDIR/attest.log" 2>&1 ||
		{ cat "$BATS_FILE_TMPDIR/attest.log"; return 1; }
}

# verify TYPE BUNDLE ARTEFACT: the documented offline verification, run in
# an empty network namespace to prove it needs no network.
verify() {
	unshare --net cosign verify-blob-attestation --key "$KEYDIR/cosign.pub" \
		--new-bundle-format --trusted-root "$PKG_ROOT/packaging/cosign-trusted-root.json" \
		--insecure-ignore-tlog=true --type "$1" --bundle "$2" "$3"
}

@test "SBOM and provenance attestations of every package verify offline" {
	for pkg in "$OUT"/*.deb "$OUT"/*.rpm; do
		run verify cyclonedx "$pkg.sbom.sigstore.json" "$pkg"
		echo "$output"
		[ "$status" -eq 0 ]
		run verify slsaprovenance1 "$pkg.provenance.sigstore.json" "$pkg"
		echo "$output"
		[ "$status" -eq 0 ]
	done
}

@test "an attestation does not verify for another artefact" {
	run verify cyclonedx "$OUT/clusterrebootd_${PKG_VERSION}_amd64.deb.sbom.sigstore.json" \
		"$OUT/clusterrebootd_${PKG_VERSION}_arm64.deb"
	echo "$output"
	[ "$status" -ne 0 ]
}

@test "the provenance names the source commit, the builder and the materials" {
	bundle="$OUT/clusterrebootd_${PKG_VERSION}_amd64.deb.provenance.sigstore.json"
	statement=$(jq -r .dsseEnvelope.payload "$bundle" | base64 -d)
	[ "$(jq -r .predicateType <<<"$statement")" = https://slsa.dev/provenance/v1 ]
	[ "$(jq -r '.subject[0].digest.sha256' <<<"$statement")" = \
		"$(sha256sum "$OUT/clusterrebootd_${PKG_VERSION}_amd64.deb" | cut -d' ' -f1)" ]
	jq -e '.predicate.runDetails.builder.id | length > 0' <<<"$statement"
	jq -e '.predicate.buildDefinition.resolvedDependencies[0].digest.gitCommit | test("^[0-9a-f]{7,40}$")' <<<"$statement"
	jq -e 'any(.predicate.buildDefinition.resolvedDependencies[]; .uri | startswith("pkg:golang/toolchain@go"))' <<<"$statement"
}
