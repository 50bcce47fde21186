# Robustness in etcd's style (lib/testonly/robustness, docs/testing.md "Robustness"):
# simulated nodes of every entry point (daemon, pipeline, FleetLock clients through
# several servers, plain holds, an operator) drive the real lib/lock, lib/slot and
# lib/fleetlock against one real etcd; a seeded scheduler runs their requests one at a
# time with faults between them; an independent checker reads etcd's history.
#
#   make robustness                        explore for ROBUSTNESS_DURATION (10m): prints
#                                          the schedules explored and every failing seed
#   make robustness ROBUSTNESS_SEEDS=500   500 seeds instead of a duration
#   make robustness ROBUSTNESS_SEED=N      replay seed N, printing its whole schedule
#   make robustness-short                  the short seed set against the etcd server
#                                          binary (part of make test; make unit runs the
#                                          same set on an embedded etcd under -race)
#
# ROBUSTNESS_FIRST_SEED=N starts the exploration at seed N (default: drawn from the
# time, printed). Not part of make test: the long run's failures are findings.

ROBUSTNESS_DURATION ?= 10m
ROBUSTNESS_PKG      := ./lib/testonly/robustness/

TEST_TARGETS += robustness-short

.PHONY: robustness robustness-short

robustness: $(ETCD_BIN)
ifdef ROBUSTNESS_SEED
	CRD_TEST_ETCD=$(ETCD_BIN) ROBUSTNESS_SEED=$(ROBUSTNESS_SEED) \
	  $(GO) test -count=1 -run 'TestRobustness$$' -v $(ROBUSTNESS_PKG)
else
	CRD_TEST_ETCD=$(ETCD_BIN) ROBUSTNESS_DURATION=$(if $(ROBUSTNESS_SEEDS),,$(ROBUSTNESS_DURATION)) \
	  ROBUSTNESS_SEEDS=$(ROBUSTNESS_SEEDS) ROBUSTNESS_FIRST_SEED=$(ROBUSTNESS_FIRST_SEED) \
	  $(GO) test -count=1 -timeout 0 -run 'TestRobustnessLong$$' -v $(ROBUSTNESS_PKG)
endif

robustness-short: $(ETCD_BIN)
	CRD_TEST_ETCD=$(ETCD_BIN) $(GO) test -count=1 -run 'TestRobustness$$|TestSchedulesReplay$$|TestLineWaitIsScheduled$$' $(ROBUSTNESS_PKG)
