# A real etcd for integration and end-to-end tests, pinned.
#
#   make etcd         etcd + etcdctl v3.7.3 built from the module proxy into .tools/bin
#   make etcd-debian  Debian's etcd-server/etcd-client (3.4) for compatibility tests,
#                     installed with its service kept stopped and disabled
#
# Other fragments use $(ETCD_BIN), $(ETCDCTL_BIN), $(ETCD_DEBIAN) and $(ETCDCTL_DEBIAN) and depend on the
# file targets $(ETCD_BIN)/$(ETCDCTL_BIN) (or the phony targets) to get them built.
#
# The binaries come from a module of their own under tools/etcd (etcd's own go.mod has
# replace directives, so `go install ...@v3.7.3` is refused). Its go.mod/go.sum pin the
# release and every dependency; they rebuild only when tools/etcd changes.

ETCD_VERSION := 3.7.3
ETCD_MOD     := $(ROOT)/tools/etcd
ETCD_BIN     := $(TOOLS_BIN)/etcd
ETCDCTL_BIN  := $(TOOLS_BIN)/etcdctl
ETCD_DEBIAN  := /usr/bin/etcd
ETCDCTL_DEBIAN := /usr/bin/etcdctl
ETCD_SRCS    := $(ETCD_MOD)/go.mod $(ETCD_MOD)/go.sum $(wildcard $(ETCD_MOD)/*.go $(ETCD_MOD)/etcdctl/*.go)
ETCD_GOBUILD := CGO_ENABLED=0 $(GO) build -mod=readonly -trimpath -buildvcs=false -ldflags '-s -w'

.PHONY: etcd etcd-debian

etcd: $(ETCD_BIN) $(ETCDCTL_BIN)
	@v=$$($(ETCD_BIN) --version); case "$$v" in "etcd Version: $(ETCD_VERSION)"$$'\n'*) ;; \
	  *) echo "etcd: $(ETCD_BIN) is not etcd $(ETCD_VERSION): $$v"; exit 1;; esac
	@v=$$($(ETCDCTL_BIN) version); case "$$v" in "etcdctl version: $(ETCD_VERSION)"$$'\n'*) ;; \
	  *) echo "etcd: $(ETCDCTL_BIN) is not etcdctl $(ETCD_VERSION): $$v"; exit 1;; esac
	@echo "etcd: $(ETCD_BIN) and $(ETCDCTL_BIN) are $(ETCD_VERSION)"

# Built to a temporary name and moved, so an interrupted build never leaves a
# binary that looks newer than its sources.
$(ETCD_BIN): $(ETCD_SRCS)
	@mkdir -p $(@D)
	cd $(ETCD_MOD) && $(ETCD_GOBUILD) -o $@.tmp . && mv -f $@.tmp $@

$(ETCDCTL_BIN): $(ETCD_SRCS)
	@mkdir -p $(@D)
	cd $(ETCD_MOD) && $(ETCD_GOBUILD) -o $@.tmp ./etcdctl && mv -f $@.tmp $@

# Debian's postinst would start (and enable) an etcd on 127.0.0.1:2379, which
# would collide with the tests' own servers. A policy-rc.d answering 101 keeps
# invoke-rc.d and deb-systemd-invoke from starting it; one that already exists is
# left alone. Whatever still runs as the etcd user afterwards is stopped, and the
# service is disabled under systemd or sysvinit, whichever is there.
etcd-debian:
	@if ! dpkg-query -W -f='$${Status}\n' etcd-server etcd-client 2>/dev/null | grep -c "install ok installed" | grep -x 2 >/dev/null; then \
	  policy=/usr/sbin/policy-rc.d; created=; \
	  if [ ! -e $$policy ]; then \
	    printf '#!/bin/sh\n# clusterrebootd make etcd-debian: start no service while installing\nexit 101\n' > $$policy; \
	    chmod 755 $$policy; created=1; \
	  fi; \
	  rc=0; $(ROOT)/scripts/need-apt etcd-server etcd-client || rc=$$?; \
	  if [ -n "$$created" ]; then rm -f $$policy; fi; \
	  [ $$rc -eq 0 ] || exit $$rc; \
	  if [ -d /run/systemd/system ]; then systemctl disable --now etcd.service >/dev/null 2>&1 || true; \
	  elif command -v update-rc.d >/dev/null && [ -e /etc/init.d/etcd ]; then update-rc.d etcd disable >/dev/null 2>&1 || true; fi; \
	  for pid in $$(pgrep -u etcd -x etcd 2>/dev/null || true); do \
	    if [ "$$(readlink /proc/$$pid/exe 2>/dev/null)" = "$(ETCD_DEBIAN)" ]; then \
	      echo "etcd-debian: stopping the packaged etcd service (pid $$pid)"; kill $$pid; \
	    fi; \
	  done; \
	fi
	@$(ETCD_DEBIAN) --version | sed -n 1p
	@ETCDCTL_API=3 $(ETCDCTL_DEBIAN) version | sed -n 1p
