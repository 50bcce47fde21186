# Packaging and supply chain: .deb/.rpm (nfpm), signatures, checksums, SBOM,
# attestations, reproducibility, and the release workflows' lint.
#
#   make package        unsigned packages for every arch into dist/
#   make sign           SIGNING_KEY=key.asc: signed packages, SHA256SUMS(.asc)
#   make sbom           CycloneDX SBOM per binary and per package into dist/
#   make attest         COSIGN_KEY=cosign.key: SBOM + provenance attestations
#   make release        VERSION=X.Y.Z: all of the above (PRD §9.2)
#   make repro-check    two builds in two directories, compared bit for bit
#   make package-test   unit checks, lintian/rpmlint, chroot install tests …
#   make package-check  the same without cosign's attestations (part of make test)
#   make lint-actions   actionlint over .github/workflows (part of make test)
#
# Tools are pinned in their own Go modules under tools/package/<tool> so the
# product's go.mod stays lean; they are built into .tools/bin on first use.
# docs/supply-chain.md explains every step.

PKG_ARCHES      ?= amd64 arm64
PKG_FORMATS     := deb rpm
DIST            ?= $(ROOT)/dist
# Everything built for the packages; another PKG_BUILD keeps a second
# build (e.g. an older version in the upgrade tests) apart.
PKG_BUILD       ?= $(ROOT)/build
PKG_STAGE       := $(PKG_BUILD)/stage
PKG_CACHE       := $(TOOLS)/cache
CONFIG_TEMPLATE ?= $(ROOT)/packaging/config.yaml
# The reference health script, shipped in /usr/share/doc/clusterrebootd/examples.
PKG_EXAMPLES    ?= $(wildcard $(ROOT)/scripts/health-check.sh)
PKG_DOCS         = $(wildcard $(ROOT)/README.md $(ROOT)/CHANGELOG.md $(ROOT)/docs/*.md)
# Rendered man pages (make man): man/<name>.<section>.
PKG_MAN_DIR     ?= $(ROOT)/man
DEBIAN_SUITE    ?= bookworm
# The host's own apt source for the suite (its mirror, proxy-friendly URI or
# snapshot pin), as apt is set up; deb.debian.org when it has none.
DEBIAN_MIRROR   ?= $(shell $(ROOT)/scripts/debian-mirror $(DEBIAN_SUITE))
DEBIAN_ROOT_TGZ := $(PKG_CACHE)/debian-$(DEBIAN_SUITE)-root.tar.gz
PKG_APT_DEPS    := debootstrap lintian rpm rpmlint cpio gnupg gpgv debsig-verify \
                   systemd-container jq
# bats itself is the pinned one of mk/bats.mk ($(BATS), target bats-install).

NFPM       := $(TOOLS_BIN)/nfpm
CYCLONEDX  := $(TOOLS_BIN)/cyclonedx-gomod
COSIGN     := $(TOOLS_BIN)/cosign
ACTIONLINT := $(TOOLS_BIN)/actionlint

# The same inputs give the same bytes: nfpm reads SOURCE_DATE_EPOCH (exported
# by the top Makefile) for every timestamp; these pin the rest.
PKG_ENV := VERSION=$(VERSION) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) TZ=UTC LC_ALL=C

TEST_TARGETS += lint-actions package-check

.PHONY: package-check package package-bin package-stage package-tools sign checksums sbom attest \
        release repro-check package-test package-deps lint-actions clean-package

## Tools (pinned modules, built once) ########################################

# $(call tool_rule,MODULE-DIR,PACKAGE): build PACKAGE from tools/package/MODULE-DIR.
define tool_rule
$(TOOLS_BIN)/$(notdir $(2)): $(ROOT)/tools/package/$(1)/go.mod $(ROOT)/tools/package/$(1)/go.sum
	@mkdir -p $(TOOLS_BIN)
	cd $(ROOT)/tools/package/$(1) && CGO_ENABLED=0 $(GO) build -trimpath -o $$@ $(2)
endef
$(eval $(call tool_rule,nfpm,github.com/goreleaser/nfpm/v2/cmd/nfpm))
$(eval $(call tool_rule,cyclonedx,github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod))
$(eval $(call tool_rule,cosign,github.com/sigstore/cosign/v2/cmd/cosign))
$(eval $(call tool_rule,actionlint,github.com/rhysd/actionlint/cmd/actionlint))

package-tools: $(NFPM) $(CYCLONEDX) $(COSIGN) $(ACTIONLINT)

package-deps:
	$(ROOT)/scripts/need-apt $(PKG_APT_DEPS)

## Binaries per architecture ################################################

package-bin:
	@for arch in $(PKG_ARCHES); do \
	  mkdir -p $(PKG_BUILD)/$$arch/bin; \
	  $(foreach cmd,$(CMDS),\
	    echo "GOARCH=$$arch go build -o build/$$arch/bin/$(cmd) ./cmd/$(cmd)"; \
	    GOARCH=$$arch $(GOBUILD) -o $(PKG_BUILD)/$$arch/bin/$(cmd) ./cmd/$(cmd);) \
	done

## Arch-independent files: man pages, docs, changelog, examples, completions

# Every staged file gets a fixed mode and SOURCE_DATE_EPOCH as its time, so
# two checkouts with different umasks and clocks give the same package.
package-stage: man
	@test -f $(CONFIG_TEMPLATE) || { echo "package: $(CONFIG_TEMPLATE) is missing: the commented config template is the package's conffile"; exit 1; }
	@ls $(PKG_MAN_DIR)/*.[158] >/dev/null 2>&1 || { echo "package: no man pages in $(PKG_MAN_DIR): run 'make man'"; exit 1; }
	rm -rf $(PKG_STAGE) && mkdir -p $(PKG_STAGE)/doc $(PKG_STAGE)/examples
	install -m 0644 $(CONFIG_TEMPLATE) $(PKG_STAGE)/config.yaml
	install -m 0644 $(CONFIG_TEMPLATE) $(PKG_STAGE)/doc/config.yaml
	$(if $(PKG_DOCS),install -m 0644 $(PKG_DOCS) $(PKG_STAGE)/doc/)
	install -m 0644 $(ROOT)/packaging/examples-README $(PKG_STAGE)/examples/README
	$(if $(PKG_EXAMPLES),install -m 0755 $(PKG_EXAMPLES) $(PKG_STAGE)/examples/)
	@for page in $(PKG_MAN_DIR)/*.[158]; do \
	  sect=$${page##*.}; mkdir -p $(PKG_STAGE)/man/man$$sect; \
	  gzip -9n < $$page > $(PKG_STAGE)/man/man$$sect/$$(basename $$page).gz; \
	  chmod 0644 $(PKG_STAGE)/man/man$$sect/$$(basename $$page).gz; \
	done
	$(ROOT)/packaging/changelog-yml $(VERSION) $(SOURCE_DATE_EPOCH) > $(PKG_STAGE)/changelog.yml
	$(MAKE) --no-print-directory completions COMPLETIONS_DIR=$(PKG_STAGE)/completions
	@{ sed 's|@BUILD@|$(PKG_BUILD)|g' $(ROOT)/packaging/nfpm.yaml; \
	   find $(PKG_STAGE)/man $(PKG_STAGE)/doc $(PKG_STAGE)/examples -type f | LC_ALL=C sort | \
	   while read -r f; do \
	     case $$f in $(PKG_STAGE)/man/*) dst=/usr/share/man/$${f#$(PKG_STAGE)/man/};; \
	       $(PKG_STAGE)/doc/*) dst=/usr/share/doc/clusterrebootd/$${f#$(PKG_STAGE)/doc/};; \
	       *) dst=/usr/share/doc/clusterrebootd/examples/$${f#$(PKG_STAGE)/examples/};; esac; \
	     mode=$$(stat -c %a "$$f"); \
	     printf '  - {src: %s, dst: %s, packager: rpm, type: doc, file_info: {mode: 0o%s}}\n' "$$f" "$$dst" "$$mode"; \
	     printf '  - {src: %s, dst: %s, packager: deb, file_info: {mode: 0o%s}}\n' "$$f" "$$dst" "$$mode"; \
	   done; \
	   find $(PKG_STAGE)/completions -type f | LC_ALL=C sort | \
	   while read -r f; do \
	     name=$${f##*/}; \
	     case $$f in */bash/*) deb=/usr/share/bash-completion/completions/$$name; rpm=$$deb;; \
	       */zsh/*) deb=/usr/share/zsh/vendor-completions/$$name; rpm=/usr/share/zsh/site-functions/$$name;; \
	       *) deb=/usr/share/fish/vendor_completions.d/$$name; rpm=$$deb;; esac; \
	     printf '  - {src: %s, dst: %s, packager: rpm, file_info: {mode: 0o644}}\n' "$$f" "$$rpm"; \
	     printf '  - {src: %s, dst: %s, packager: deb, file_info: {mode: 0o644}}\n' "$$f" "$$deb"; \
	   done; } > $(PKG_BUILD)/nfpm.yaml
	find $(PKG_STAGE) -type d -exec chmod 0755 {} +
	find $(PKG_STAGE) -exec touch -h -d @$(SOURCE_DATE_EPOCH) {} +

## Packages #################################################################

# $(call nfpm_all,OUTDIR,EXTRA-ENV): every format for every arch.
define nfpm_all
	@mkdir -p $(1)
	@cd $(ROOT) && for arch in $(PKG_ARCHES); do for fmt in $(PKG_FORMATS); do \
	  echo "nfpm package -p $$fmt ARCH=$$arch -> $(1)"; \
	  $(PKG_ENV) ARCH=$$arch $(2) $(NFPM) package --config $(PKG_BUILD)/nfpm.yaml \
	    --packager $$fmt --target $(1)/ >/dev/null; \
	done; done
endef

package: $(NFPM) package-bin package-stage
	rm -f $(DIST)/*.deb $(DIST)/*.rpm
	$(call nfpm_all,$(DIST),DEB_SIGNING_KEY_FILE= RPM_SIGNING_KEY_FILE= SIGNING_KEY_ID=)
	@ls -l $(DIST)/*.deb $(DIST)/*.rpm

## Signing and checksums ####################################################

# SIGNING_KEY: an armored OpenPGP private key file; its passphrase, if any,
# comes from NFPM_PASSPHRASE (CI: the secret store, never the command line).
SIGNING_KEY    ?=
SIGNING_KEY_ID ?=

# Packages again, with embedded signatures, exactly what `make package` staged
# in $(PKG_BUILD) (nfpm signs while writing; the signed packages carry the
# same control/data members and rpm header as the unsigned ones), then writes
# SHA256SUMS and its detached signature.
sign: $(NFPM)
	@test -f $(PKG_BUILD)/nfpm.yaml || { echo "sign: nothing staged in $(PKG_BUILD): run 'make package' first"; exit 1; }
	@test -n "$(SIGNING_KEY)" || { echo "sign: set SIGNING_KEY=path/to/private-key.asc"; exit 1; }
	@test -r "$(SIGNING_KEY)" || { echo "sign: cannot read SIGNING_KEY $(SIGNING_KEY)"; exit 1; }
	rm -f $(DIST)/*.deb $(DIST)/*.rpm
	$(call nfpm_all,$(DIST),DEB_SIGNING_KEY_FILE=$(abspath $(SIGNING_KEY)) RPM_SIGNING_KEY_FILE=$(abspath $(SIGNING_KEY)) SIGNING_KEY_ID=$(SIGNING_KEY_ID))
	$(MAKE) --no-print-directory checksums DIST=$(DIST) SIGNING_KEY=$(SIGNING_KEY)

# SHA256SUMS over every artefact in dist/; signed (armored, detached) when
# SIGNING_KEY is set. Verify with: gpgv --keyring pub.gpg SHA256SUMS.asc SHA256SUMS
checksums:
	cd $(DIST) && rm -f SHA256SUMS SHA256SUMS.asc && \
	  find . -maxdepth 1 -type f ! -name 'SHA256SUMS*' -printf '%f\n' | LC_ALL=C sort | xargs -r sha256sum > SHA256SUMS
	@if [ -n "$(SIGNING_KEY)" ]; then \
	  gh=$$(mktemp -d); trap 'rm -rf "$$gh"' EXIT; \
	  gpg --homedir "$$gh" --batch --quiet --import $(SIGNING_KEY); \
	  gpg --homedir "$$gh" --batch --yes --pinentry-mode loopback \
	    --passphrase "$${NFPM_PASSPHRASE:-}" --armor --detach-sign \
	    $(if $(SIGNING_KEY_ID),--local-user $(SIGNING_KEY_ID)) \
	    --output $(DIST)/SHA256SUMS.asc $(DIST)/SHA256SUMS; \
	  echo "signed $(DIST)/SHA256SUMS.asc"; \
	fi

## SBOM #####################################################################

# One CycloneDX JSON per binary and arch (what is linked into that binary)
# and one per package (their union). -noserial -notimestamp: reproducible.
sbom: $(CYCLONEDX) package-bin
	@mkdir -p $(DIST)
	@for arch in $(PKG_ARCHES); do \
	  for cmd in $(CMDS); do \
	    out=$(DIST)/clusterrebootd_$(VERSION)_$${cmd}_$$arch.cdx.json; \
	    $(CYCLONEDX) bin -json -noserial -notimestamp -version v$(VERSION) \
	      -output $$out $(PKG_BUILD)/$$arch/bin/$$cmd; \
	  done; \
	  $(ROOT)/packaging/sbom-merge clusterrebootd $(VERSION) $$arch \
	    $(foreach cmd,$(CMDS),$(DIST)/clusterrebootd_$(VERSION)_$(cmd)_$$arch.cdx.json) \
	    > $(DIST)/clusterrebootd_$(VERSION)_$$arch.cdx.json; \
	  echo "sbom: $(DIST)/clusterrebootd_$(VERSION)_$$arch.cdx.json"; \
	done

## Attestations (cosign, offline-verifiable) ################################

# COSIGN_KEY: a cosign private key (cosign generate-key-pair); its password
# from COSIGN_PASSWORD. Every package gets two bundles: the CycloneDX SBOM of
# its arch and a SLSA provenance statement. No transparency log upload: the
# bundles verify offline (docs/supply-chain.md has the exact command).
COSIGN_KEY ?=

attest: $(COSIGN)
	@test -n "$(COSIGN_KEY)" || { echo "attest: set COSIGN_KEY=path/to/cosign.key"; exit 1; }
	@for pkg in $(DIST)/*.deb $(DIST)/*.rpm; do \
	  case "$$pkg" in *amd64*|*x86_64*) arch=amd64;; *) arch=arm64;; esac; \
	  $(ROOT)/packaging/provenance "$$pkg" $(COMMIT) $(SOURCE_DATE_EPOCH) > "$$pkg.provenance.json"; \
	  $(COSIGN) attest-blob --yes --key $(COSIGN_KEY) --tlog-upload=false --new-bundle-format \
	    --type cyclonedx --predicate $(DIST)/clusterrebootd_$(VERSION)_$$arch.cdx.json \
	    --bundle "$$pkg.sbom.sigstore.json" "$$pkg" >/dev/null; \
	  $(COSIGN) attest-blob --yes --key $(COSIGN_KEY) --tlog-upload=false --new-bundle-format \
	    --type slsaprovenance1 --predicate "$$pkg.provenance.json" \
	    --bundle "$$pkg.provenance.sigstore.json" "$$pkg" >/dev/null; \
	  echo "attest: $$pkg"; \
	done

## Release (PRD §9.2) #######################################################

release:
	@test -n "$(SIGNING_KEY)" || { echo "release: set SIGNING_KEY (and COSIGN_KEY)"; exit 1; }
	@grep -q "^## \[$(VERSION)\]" $(ROOT)/CHANGELOG.md || { echo "release: CHANGELOG.md has no section '## [$(VERSION)]'"; exit 1; }
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(MAKE) --no-print-directory package sbom VERSION=$(VERSION)
	$(MAKE) --no-print-directory sign VERSION=$(VERSION)
	$(if $(COSIGN_KEY),$(MAKE) --no-print-directory attest VERSION=$(VERSION))
	$(ROOT)/packaging/changelog-section $(VERSION) < $(ROOT)/CHANGELOG.md > $(DIST)/RELEASE-NOTES.md
	$(MAKE) --no-print-directory checksums VERSION=$(VERSION)
	@ls -l $(DIST)

## Reproducibility ##########################################################

# Two copies of the working tree in two directories, each built from scratch
# (its own Go build cache) with SOURCE_DATE_EPOCH of the last commit; every
# unsigned package and SBOM must be identical byte for byte.
repro-check:
	$(ROOT)/packaging/repro-check $(VERSION) $(COMMIT) $(SOURCE_DATE_EPOCH)

## Tests ####################################################################

package-test: package-deps package-tools bats-install package sbom $(DEBIAN_ROOT_TGZ)
	$(PKG_BATS) $(ROOT)/bats/package_*.bats

# The same without the cosign attestation suite, for make test: built cold,
# cosign alone takes 6-7 minutes on 2 cores; everything else (lintian,
# rpmlint, install/upgrade/purge in a chroot, signatures, SBOM, the unit's
# sandbox in nspawn) runs here in about 2 minutes with the tools built.
package-check: package-deps $(NFPM) $(CYCLONEDX) bats-install package sbom $(DEBIAN_ROOT_TGZ)
	$(PKG_BATS) $(filter-out %/package_cosign.bats,$(wildcard $(ROOT)/bats/package_*.bats))

PKG_BATS = PKG_DIST=$(DIST) PKG_VERSION=$(VERSION) PKG_ROOT=$(ROOT) PKG_ROOT_TGZ=$(DEBIAN_ROOT_TGZ) \
	  $(BATS) --timing

# A Debian root with systemd and dbus: chroot install tests and nspawn boots.
# Built once (about a minute) and kept under .tools/cache.
$(DEBIAN_ROOT_TGZ):
	$(ROOT)/scripts/need-apt debootstrap
	@mkdir -p $(PKG_CACHE)
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,ca-certificates \
	    $(DEBIAN_SUITE) $$tmp/root $(DEBIAN_MIRROR) >$$tmp/log 2>&1 || { tail -20 $$tmp/log; exit 1; }; \
	  tar -C $$tmp/root --numeric-owner -czf $@.tmp . && mv $@.tmp $@

# actionlint with shellcheck over every run: script (same result everywhere).
lint-actions: $(ACTIONLINT)
	@$(ROOT)/scripts/need-apt shellcheck
	$(ACTIONLINT) -no-color -shellcheck=shellcheck $(ROOT)/.github/workflows/*.yml

clean-package:
	rm -rf $(PKG_BUILD) $(DIST)
