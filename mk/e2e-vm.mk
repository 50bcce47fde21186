# On real VMs: Debian 12 VMs under QEMU (TCG: software emulation), built from
# Debian's packages by scripts/vm-image and cached under .tools/cache/vm, the
# built .deb installed in each, etcd 3.7.3 with TLS in the test's network
# namespace; a real kernel upgrade and real reboots (bats/vm/, bats/lib/vm.bash;
# docs/e2e.md "On real VMs").
#
#   make e2e-vm-smoke   one VM, one kernel upgrade held open mid-transaction,
#                       then one real reboot into the new kernel. Part of make
#                       test. Root only.
#   make e2e-vm         the smoke test and the fleet scenarios A-D (three VMs
#                       each). Not part of make test: it takes far longer
#                       than its budget (docs/testing.md has the times).
#   make e2e-vm-image   only build or refresh the cached image and kernel .deb
#
# make e2e-vm E2E_VM_FILES=bats/vm/e2e_vm.bats E2E_VM_BATS_FLAGS='--filter "scenario B"'
# E2E_VM_DEB=other.deb make e2e-vm-smoke   test another build of the package
#
# The package is built for amd64 (the VMs are x86_64) into build/e2e-vm, so
# dist/ and build/ of `make package` are left alone. Runs live in
# build/e2e-vm/runs/PID and a network namespace crd-e2e-vm-PID; scripts/vm-sweep
# removes those of runs that died, before and after every run.

E2E_VM_BUILD   = $(ROOT)/build/e2e-vm
E2E_VM_DEB    ?= $(E2E_VM_BUILD)/dist/clusterrebootd_$(VERSION)_amd64.deb
E2E_VM_CACHE   = $(TOOLS)/cache/vm
E2E_VM_SUITE  ?= bookworm
E2E_VM_FILES  ?= $(ROOT)/bats/vm/e2e_vm_smoke.bats $(ROOT)/bats/vm/e2e_vm.bats
E2E_VM_BATS_FLAGS ?=
# QEMU and its tools; debootstrap, sfdisk (fdisk), mkfs/e2fsck (e2fsprogs),
# losetup (mount) for the image; ssh into the VMs; socat for the serial and QMP sockets; nft for
# the partitions; openssl for etcd's certificates.
E2E_VM_APT    := qemu-system-x86 qemu-utils debootstrap fdisk e2fsprogs mount openssh-client socat \
                 nftables iproute2 jq openssl util-linux procps

TEST_TARGETS += e2e-vm-smoke

.PHONY: e2e-vm e2e-vm-smoke e2e-vm-image e2e-vm-root e2e-vm-apt e2e-vm-deb

# $(call e2e_vm_run,FILES): prepare the image, then bats over FILES with the
# variables vm-prepare prints; stale runs are swept before and after.
define e2e_vm_run
	@$(ROOT)/scripts/vm-sweep
	vars=$$(nice -n 10 $(ROOT)/scripts/vm-prepare $(E2E_VM_CACHE) $(E2E_VM_SUITE)) || exit 1; \
	  echo "$$vars" | sed 's/^/e2e-vm: /'; \
	  rc=0; env $$vars VM_DEB=$(E2E_VM_DEB) ETCD_TEST_BIN=$(ETCD_BIN) ETCDCTL_TEST_BIN=$(ETCDCTL_BIN) \
	  BATS_LIB_PATH=$(BATS_PREFIX)/node_modules $(BATS) --print-output-on-failure --timing $(E2E_VM_BATS_FLAGS) $(1) || rc=$$?; \
	  $(ROOT)/scripts/vm-sweep; exit $$rc
endef

e2e-vm: e2e-vm-root e2e-vm-apt etcd bats-install e2e-vm-deb
	$(call e2e_vm_run,$(E2E_VM_FILES))

e2e-vm-smoke: e2e-vm-root e2e-vm-apt etcd bats-install e2e-vm-deb
	$(call e2e_vm_run,$(ROOT)/bats/vm/e2e_vm_smoke.bats)

e2e-vm-image: e2e-vm-root e2e-vm-apt
	nice -n 10 $(ROOT)/scripts/vm-prepare $(E2E_VM_CACHE) $(E2E_VM_SUITE)

e2e-vm-root:
	@[ "$$(id -u)" = 0 ] || { echo "e2e-vm: must run as root (loop devices for the image, network namespaces, taps): sudo make $@"; exit 1; }

e2e-vm-apt:
	@$(ROOT)/scripts/need-apt $(E2E_VM_APT)

# `make package` for amd64 only (it builds nfpm when missing; the .rpm comes along).
e2e-vm-deb:
	$(MAKE) --no-print-directory package PKG_ARCHES=amd64 PKG_BUILD=$(E2E_VM_BUILD)/build DIST=$(E2E_VM_BUILD)/dist
	@test -f $(E2E_VM_DEB) || { echo "e2e-vm: $(E2E_VM_DEB) was not built"; exit 1; }
