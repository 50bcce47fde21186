# Shell tests: bats-core with bats-support and bats-assert, pinned by
# tools/bats/package.json + package-lock.json and installed into .tools/npm
# (never into a node_modules at the repository root).
#
#   make bats                      build bin/ and etcd (mk/etcd.mk), then run bats/*.bats
#   make bats BATS_FILES=bats/x.bats   run one file
#   make bats-install              only install bats (and npm and jq from apt if missing)
#
# The suites find the tools on PATH: bin/ by default, or CLUSTERREBOOTD_BIN_DIR
# (e.g. /usr/bin to test installed packages).

BATS_VERSION := 1.13.0
BATS_PKG     := $(ROOT)/tools/bats
BATS_PREFIX  := $(TOOLS)/npm
BATS         := $(BATS_PREFIX)/node_modules/bats/bin/bats
BATS_STAMP   := $(BATS_PREFIX)/node_modules/.clusterrebootd-installed
# bats/package_*.bats need built packages (make package-test); bats/e2e_*.bats
# are the multi-node suite (make e2e).
BATS_FILES   ?= $(filter-out $(ROOT)/bats/package_% $(ROOT)/bats/e2e_%,$(wildcard $(ROOT)/bats/*.bats))
# BATS_TEST_TIMEOUT=SECONDS (unset by default) limits each test; bats then needs
# ps(1) and prints "kill: No such process" noise for each test.

TEST_TARGETS += bats

.PHONY: bats bats-install bats-apt

bats: build etcd bats-install
	BATS_LIB_PATH=$(BATS_PREFIX)/node_modules $(BATS) --print-output-on-failure $(BATS_FILES)

bats-install: $(BATS_STAMP) bats-apt
	@v=$$($(BATS) --version); [ "$$v" = "Bats $(BATS_VERSION)" ] \
	  || { echo "bats: $(BATS) is '$$v', want Bats $(BATS_VERSION)"; exit 1; }

# jq reads the tools' JSON in the suites.
bats-apt:
	@$(ROOT)/scripts/need-apt jq

# npm ci installs exactly the lock file. The npm cache stays under .tools too.
$(BATS_STAMP): $(BATS_PKG)/package.json $(BATS_PKG)/package-lock.json
	@command -v npm >/dev/null || $(ROOT)/scripts/need-apt npm
	@mkdir -p $(BATS_PREFIX)
	cp $(BATS_PKG)/package.json $(BATS_PKG)/package-lock.json $(BATS_PREFIX)/
	cd $(BATS_PREFIX) && npm ci --no-audit --no-fund --ignore-scripts --cache $(TOOLS)/npm-cache --loglevel=error
	@touch $@
