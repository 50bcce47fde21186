# Under real systemd: the built .deb in systemd-nspawn containers booted from the
# cached Debian root, really rebooting, against a real etcd on the host's loopback
# (bats/systemd/e2e_systemd.bats, bats/lib/systemd.bash; docs/e2e.md "Under real systemd").
#
#   make e2e-systemd    root only; 1-1.5 minutes on 2 cores once everything is built.
#                       Part of make test (which needs root anyway for the e2e
#                       suite's mount namespaces); GitHub's CI runs it nightly.
#
# E2E_SYSTEMD_CONFIG='max_holders: 2' make e2e-systemd   YAML given to every
# container as config.d/20-override.yaml (to watch the test fail when a property breaks).
# make e2e-systemd E2E_SYSTEMD_BATS_FLAGS=--no-tempdir-cleanup   keep the containers' roots.
#
# The package is built for this machine's architecture into a directory of its
# own, so dist/ and build/ of `make package` are left alone. This fragment is
# read before mk/package.mk and mk/etcd.mk: their variables are used only in
# recipes (expanded when they run), never in prerequisites.

E2E_SD_FILES = $(ROOT)/bats/systemd/e2e_systemd.bats
E2E_SD_BUILD = $(ROOT)/build/e2e-systemd
E2E_SD_DEB   = $(E2E_SD_BUILD)/dist/clusterrebootd_$(VERSION)_$(GOARCH).deb
# nsenter and unshare (util-linux), pgrep (procps), jq; systemd-nspawn and
# journalctl -D (systemd-container, systemd); debootstrap for the cached root.
E2E_SD_APT   := systemd-container debootstrap util-linux procps jq
E2E_SYSTEMD_BATS_FLAGS ?=

TEST_TARGETS += e2e-systemd

.PHONY: e2e-systemd e2e-systemd-root e2e-systemd-apt e2e-systemd-debian-root e2e-systemd-deb

e2e-systemd: e2e-systemd-root e2e-systemd-apt etcd bats-install e2e-systemd-debian-root e2e-systemd-deb
	PKG_ROOT=$(ROOT) PKG_ROOT_TGZ=$(DEBIAN_ROOT_TGZ) E2E_SD_DEB=$(E2E_SD_DEB) ETCD_TEST_BIN=$(ETCD_BIN) \
	  BATS_LIB_PATH=$(BATS_PREFIX)/node_modules $(BATS) --print-output-on-failure --timing $(E2E_SYSTEMD_BATS_FLAGS) $(E2E_SD_FILES)

e2e-systemd-root:
	@[ "$$(id -u)" = 0 ] || { echo "e2e-systemd: must run as root (systemd-nspawn boots containers): sudo make e2e-systemd"; exit 1; }

e2e-systemd-apt:
	@$(ROOT)/scripts/need-apt $(E2E_SD_APT)

# The cached debootstrap root of mk/package.mk (built once, about a minute).
e2e-systemd-debian-root:
	@$(MAKE) --no-print-directory $(DEBIAN_ROOT_TGZ)

# `make package` for this arch only (it builds nfpm when missing; the .rpm comes along).
e2e-systemd-deb:
	$(MAKE) --no-print-directory package PKG_ARCHES=$(GOARCH) \
	  PKG_BUILD=$(E2E_SD_BUILD)/build DIST=$(E2E_SD_BUILD)/dist
	@test -f $(E2E_SD_DEB) || { echo "e2e-systemd: $(E2E_SD_DEB) was not built"; exit 1; }
