# clusterrebootd — build, test, package.
#
#   make demo    the rolling reboot of five simulated nodes against a local etcd
#   make test    every test (installs what it needs, pinned)
#   make build   the six binaries into bin/
#
# Areas keep their rules in mk/*.mk; each appends its test targets to TEST_TARGETS.

SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO        ?= go
ROOT      := $(CURDIR)
BIN       := $(ROOT)/bin
TOOLS     := $(ROOT)/.tools
TOOLS_BIN := $(TOOLS)/bin
export PATH := $(BIN):$(TOOLS_BIN):$(PATH)

CMDS := clusterrebootd crd-detect crd-lock crd-gate crd-window crd-reboot

# Reproducible builds: SOURCE_DATE_EPOCH from the last commit.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH
VERSION   ?= $(shell git describe --tags --match 'v*' 2>/dev/null | sed 's/^v//' || true)
ifeq ($(VERSION),)
VERSION   := 0.1.0
endif
COMMIT    ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
BUILD_DATE := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
GOARCH    ?= $(shell $(GO) env GOARCH)
VPKG      := github.com/clusterrebootd/clusterrebootd/lib/version
LDFLAGS   := -s -w -buildid= -X $(VPKG).Version=$(VERSION) -X $(VPKG).Commit=$(COMMIT) -X $(VPKG).BuildDate=$(BUILD_DATE)
# Every binary is what `go build ./cmd/X` builds, with these flags and Go's
# defaults: no GOEXPERIMENT, no //go:debug (docs/decisions.md).
GOBUILD   := CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)'

TEST_TARGETS := lint unit testscript

include $(sort $(wildcard mk/*.mk))

.PHONY: build test unit testscript cover clean
build: $(addprefix $(BIN)/,$(CMDS))

$(BIN)/%: FORCE
	@mkdir -p $(BIN)
	$(GOBUILD) -o $@ ./cmd/$*

FORCE:

test: $(TEST_TARGETS)
	@echo "make test: all of $(TEST_TARGETS) passed"

unit:
	$(GO) test -race -count=1 ./lib/... ./driver/... ./cmd/...

# zsh and fish check the generated completions (bash is always there); the
# scripts that count etcd's requests start the etcd binary (etcd-start -binary).
testscript: testscript-apt $(ETCD_BIN)
	$(GO) test -count=1 ./testscripts/...

.PHONY: testscript-apt
testscript-apt:
	@$(ROOT)/scripts/need-apt zsh fish

cover:
	$(GO) test -count=1 -coverprofile=cover.out -coverpkg=./lib/...,./cmd/tool/... ./lib/... ./cmd/tool/... ./testscripts/...
	@$(GO) tool cover -func=cover.out | tail -1

clean:
	rm -rf $(BIN) dist cover.out
