# Soak (PRD 11.5), accelerated: simulated nodes reboot over and over against a real
# etcd while every daemon is sampled for leaks (scripts/soak, docs/soak.md).
#
#   make soak                        10 minutes (SOAK_DURATION=10m)
#   make soak SOAK_DURATION=24h      the full soak
#   make soak-short                  2 minutes (part of make test)
#
# Summary, samples and ledger go to .tools/soak/ (last-summary.txt is the latest).

SOAK_DURATION ?= 10m

TEST_TARGETS += soak-short

.PHONY: soak soak-short

soak: build etcd e2e-apt
	SOAK_DURATION=$(SOAK_DURATION) $(ROOT)/scripts/soak

soak-short: build etcd e2e-apt
	SOAK_DURATION=2m $(ROOT)/scripts/soak
