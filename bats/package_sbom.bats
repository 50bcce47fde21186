#!/usr/bin/env bats
# CycloneDX SBOMs (make sbom): one per binary and arch, one per package,
# valid JSON naming exactly what each binary links.

load ../packaging/test/lib

sbom() { echo "$PKG_DIST/clusterrebootd_${PKG_VERSION}_$1.cdx.json"; }
has_component() { jq -e --arg n "$2" 'any(.components[]?; .name == $n)' "$1" >/dev/null; }

@test "every binary and package has a CycloneDX JSON SBOM" {
	for arch in amd64 arm64; do
		for f in "$(sbom "$arch")" $(for t in clusterrebootd crd-detect crd-window crd-gate crd-lock crd-reboot; do sbom "${t}_$arch"; done); do
			[ -s "$f" ] || fail "missing $f"
			run jq -r '[.bomFormat, .specVersion, (.components | length)] | @tsv' "$f"
			[ "$status" -eq 0 ] || fail "$f is not JSON"
			read -r format spec count <<<"$output"
			[ "$format" = CycloneDX ]
			[[ "$spec" == 1.* ]]
			[ "$count" -gt 0 ]
			jq -e 'has("serialNumber") or (.metadata | has("timestamp")) | not' "$f" >/dev/null ||
				fail "$f carries a serial number or timestamp: not reproducible"
			jq -e 'all(.components[]; (.purl | startswith("pkg:")) and (.version | length > 0))' "$f" >/dev/null
		done
	done
}

@test "crd-lock links the etcd client and yaml; crd-window does not link etcd" {
	has_component "$(sbom crd-lock_amd64)" go.etcd.io/etcd/client/v3 ||
		fail "go.etcd.io/etcd/client/v3 missing from crd-lock's SBOM"
	has_component "$(sbom crd-lock_amd64)" gopkg.in/yaml.v3
	! has_component "$(sbom crd-window_amd64)" go.etcd.io/etcd/client/v3 ||
		fail "crd-window's SBOM names the etcd client it must not link"
	has_component "$(sbom crd-window_amd64)" gopkg.in/yaml.v3
}

@test "the package SBOM is the union of its binaries' SBOMs" {
	pkg=$(sbom amd64)
	[ "$(jq -r .metadata.component.purl "$pkg")" = "pkg:generic/clusterrebootd@${PKG_VERSION}?arch=amd64" ]
	for t in clusterrebootd crd-detect crd-window crd-gate crd-lock crd-reboot; do
		for name in $(jq -r '.components[].name' "$(sbom "${t}_amd64")"); do
			has_component "$pkg" "$name" || fail "$name ($t) missing from the package SBOM"
		done
	done
}
