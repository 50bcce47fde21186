# The cluster lock against real etcd servers: the pinned build ($(ETCD_BIN), from
# mk/etcd.mk) and Debian's etcd-server 3.4 ($(ETCD_DEBIAN)) for compatibility.
# Each test starts its own server on random 127.0.0.1 ports and stops it; the
# packaged service is never used.
#
#   make test-lock-integration   lib/etcd + lib/lock scenarios (and etcdtest's
#                                own: a server ends with its starter), the crd-lock
#                                testscripts (with the per-node etcd roles of
#                                packaging/etcd-rbac.sh, which need etcdctl) and
#                                the daemon's steps (publish, cycle, complete),
#                                once per server binary

LOCK_IT_PKGS := ./lib/etcd/... ./lib/lock/... ./lib/testonly/etcdtest/

.PHONY: test-lock-integration
test-lock-integration: $(ETCD_BIN) $(ETCDCTL_BIN) etcd-debian
	@for bin in $(ETCD_BIN) $(ETCD_DEBIAN); do \
	  echo "test-lock-integration: against $$bin ($$($$bin --version | sed -n 1p))"; \
	  CRD_TEST_ETCD=$$bin $(GO) test -race -count=1 $(LOCK_IT_PKGS) || exit 1; \
	  CRD_TEST_ETCD=$$bin $(GO) test -count=1 ./testscripts/ -run 'TestScripts/crd-lock|TestCrdLockScripts' || exit 1; \
	  ETCD_TEST_BIN=$$bin $(GO) test -race -count=1 -run TestRealEtcdServer ./driver/cluster/ || exit 1; \
	done

TEST_TARGETS += test-lock-integration
