# End-to-end: several real daemons against a real 3-member etcd cluster on loopback,
# with simulated reboots (bats/lib/sim.bash, scripts/sim-reboot; docs/e2e.md).
#
#   make e2e                  every bats/e2e_*.bats, ~7 min on 2 cores (part of make test)
#   make e2e-quick            without the tests tagged slow (the 7-node rollout and the
#                             node that never comes back, ~30 s and ~70 s), ~5.5 min
#   make e2e E2E_FILES=bats/e2e_rollout.bats   one file
#   make demo                 five simulated nodes rolling through a reboot, live (scripts/demo)

E2E_FILES ?= $(sort $(wildcard $(ROOT)/bats/e2e_*.bats))
E2E_BATS  := BATS_LIB_PATH=$(BATS_PREFIX)/node_modules $(BATS) --print-output-on-failure --timing

TEST_TARGETS += e2e

.PHONY: e2e e2e-quick e2e-apt demo

e2e: build etcd bats-install e2e-apt
	$(E2E_BATS) $(E2E_FILES)

e2e-quick: build etcd bats-install e2e-apt
	$(E2E_BATS) --filter-tags '!slow' $(E2E_FILES)

# unshare and setsid (util-linux), pkill and ps (procps) drive the simulated nodes;
# socat forwards (and, stopped, partitions) a node's etcd traffic in e2e_chaos.bats.
e2e-apt:
	@$(ROOT)/scripts/need-apt util-linux procps socat

demo: build etcd e2e-apt
	@$(ROOT)/scripts/demo

