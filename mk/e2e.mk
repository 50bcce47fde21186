# End-to-end: several real daemons against a real 3-member etcd cluster on loopback,
# with simulated reboots (bats/lib/sim.bash, scripts/sim-reboot; docs/e2e.md).
#
#   make e2e                  every bats/e2e_*.bats, ~18 min on 2 cores (part of make test;
#                             e2e_failure_budget.bats ~6 min and e2e_mixed_fleet.bats ~4)
#   make e2e-quick            without the tests tagged slow (the 7-node rollout, the
#                             node that never comes back, the latency raised on the
#                             lock holder and the failure while two are down, ~30 s,
#                             ~70 s, ~30 s and ~80 s), ~14 min
#   make e2e E2E_FILES=bats/e2e_rollout.bats   one file
#   make demo                 five simulated nodes rolling through a reboot, live (scripts/demo)
#
# e2e_latency.bats sends etcd traffic through tools/slowproxy, a TCP forwarder that
# delays it (a module of its own without dependencies, built into .tools/bin when its
# sources change; its tests and go vet run first).
#
# e2e_skew.bats skews one node's wall clock: clusterrebootd and crd-lock built with the
# build tag crdtestclock into .tools/bin-testclock (lib/testclock; CRD_TEST_CLOCK_OFFSET).
# make build and the packages never carry that tag.

E2E_FILES ?= $(sort $(wildcard $(ROOT)/bats/e2e_*.bats))
SLOWPROXY_MOD  := $(ROOT)/tools/slowproxy
SLOWPROXY_BIN  := $(TOOLS_BIN)/slowproxy
SLOWPROXY_SRCS := $(SLOWPROXY_MOD)/go.mod $(wildcard $(SLOWPROXY_MOD)/*.go)
RECEIVER_MOD   := $(ROOT)/tools/receiver
RECEIVER_BIN   := $(TOOLS_BIN)/receiver
RECEIVER_SRCS  := $(RECEIVER_MOD)/go.mod $(wildcard $(RECEIVER_MOD)/*.go)
TESTCLOCK_BIN  := $(TOOLS)/bin-testclock
TESTCLOCK_CMDS := clusterrebootd crd-lock
E2E_BATS  := TESTCLOCK_BIN_DIR=$(TESTCLOCK_BIN) BATS_LIB_PATH=$(BATS_PREFIX)/node_modules $(BATS) --print-output-on-failure --timing

TEST_TARGETS += e2e

.PHONY: e2e e2e-quick e2e-apt e2e-testclock demo

e2e: build e2e-testclock etcd bats-install e2e-apt monitoring-debian $(SLOWPROXY_BIN) $(RECEIVER_BIN)
	CRD_TEST_MONITORING=1 $(E2E_BATS) $(E2E_FILES)

e2e-quick: build e2e-testclock etcd bats-install e2e-apt monitoring-debian $(SLOWPROXY_BIN) $(RECEIVER_BIN)
	CRD_TEST_MONITORING=1 $(E2E_BATS) --filter-tags '!slow' $(E2E_FILES)

# unshare and setsid (util-linux), pkill and ps (procps) drive the simulated nodes;
# socat forwards (and, stopped, partitions) a node's etcd traffic in e2e_chaos.bats.
e2e-apt:
	@$(ROOT)/scripts/need-apt util-linux procps socat

# Built to a temporary name and moved, so an interrupted build never leaves a
# binary that looks newer than its sources.
$(SLOWPROXY_BIN): $(SLOWPROXY_SRCS)
	@mkdir -p $(@D)
	cd $(SLOWPROXY_MOD) && $(GO) vet . && $(GO) test -count=1 . \
	  && CGO_ENABLED=0 $(GO) build -mod=readonly -trimpath -buildvcs=false -ldflags '-s -w' -o $@.tmp . && mv -f $@.tmp $@

# tools/receiver records notifications (the demo and e2e tests); built like slowproxy.
$(RECEIVER_BIN): $(RECEIVER_SRCS)
	@mkdir -p $(@D)
	cd $(RECEIVER_MOD) && $(GO) vet . && $(GO) test -count=1 . \
	  && CGO_ENABLED=0 $(GO) build -mod=readonly -trimpath -buildvcs=false -ldflags '-s -w' -o $@.tmp . && mv -f $@.tmp $@

# Test builds with a skewable wall clock (never shipped: their version ends in
# +testclock). Always rebuilt, like bin/: go's build cache makes that cheap.
e2e-testclock: $(addprefix $(TESTCLOCK_BIN)/,$(TESTCLOCK_CMDS))

$(TESTCLOCK_BIN)/%: FORCE
	@mkdir -p $(@D)
	$(GOBUILD) -tags crdtestclock -o $@ ./cmd/$*

demo: build etcd e2e-apt monitoring-debian $(RECEIVER_BIN)
	@$(ROOT)/scripts/demo

