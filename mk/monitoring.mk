# The shipped Prometheus alerting rules, checked and unit-tested by Debian's promtool.
#
#   make monitoring-check   promtool check rules + promtool test rules on packaging/monitoring
#   make test-monitoring    the alert gate, silences and notifications against a real
#                           Prometheus and Alertmanager (lib/testonly/monitortest starts them
#                           on free loopback ports, data in the test's temp dir)
#
# Debian 12's `prometheus` package (2.42) ships promtool; `prometheus-alertmanager`
# (0.25) ships the server and amtool. Its postinst would
# start (and enable) a Prometheus on :9090; a policy-rc.d answering 101 keeps
# deb-systemd-invoke and invoke-rc.d from starting it (one that already exists
# is left alone), and the service is disabled afterwards, as for etcd-debian
# (mk/etcd.mk). The dashboard's and the rules' metric names are checked against
# the daemon's exposition by a unit test (driver/monitoring_test.go).

MONITORING_DIR := $(ROOT)/packaging/monitoring
PROMTOOL       := /usr/bin/promtool

.PHONY: monitoring-check promtool-debian monitoring-debian test-monitoring

# $(call apt_quiet,PACKAGE,SERVICE): install a Debian package without
# starting its service, and leave the service disabled.
define apt_quiet
	@if ! dpkg-query -W -f='$${Status}\n' $(1) 2>/dev/null | grep "install ok installed" >/dev/null; then \
	  policy=/usr/sbin/policy-rc.d; created=; \
	  if [ ! -e $$policy ]; then \
	    printf '#!/bin/sh\n# clusterrebootd make ($(1)): start no service while installing\nexit 101\n' > $$policy; \
	    chmod 755 $$policy; created=1; \
	  fi; \
	  rc=0; $(ROOT)/scripts/need-apt $(1) || rc=$$?; \
	  if [ -n "$$created" ]; then rm -f $$policy; fi; \
	  [ $$rc -eq 0 ] || exit $$rc; \
	  if [ -d /run/systemd/system ]; then systemctl disable --now $(2).service >/dev/null 2>&1 || true; \
	  elif command -v update-rc.d >/dev/null && [ -e /etc/init.d/$(2) ]; then update-rc.d $(2) disable >/dev/null 2>&1 || true; fi; \
	fi
endef

promtool-debian:
	$(call apt_quiet,prometheus,prometheus)
	@$(PROMTOOL) --version 2>&1 | sed -n 1p

monitoring-debian: promtool-debian
	$(call apt_quiet,prometheus-alertmanager,prometheus-alertmanager)
	@/usr/bin/prometheus-alertmanager --version 2>&1 | sed -n 1p

# Packages whose tests need the real servers; each skips them without
# CRD_TEST_MONITORING=1 when the binaries are missing (plain `make unit`).
MONITORING_TEST_PKGS := ./lib/testonly/monitortest/... ./lib/silence/... ./driver/cluster/ ./lib/alertgate/...

test-monitoring: monitoring-debian
	CRD_TEST_MONITORING=1 $(GO) test -count=1 $(MONITORING_TEST_PKGS)
	CRD_TEST_MONITORING=1 $(GO) test -count=1 ./testscripts/ -run 'TestScripts/monitoring_'

monitoring-check: promtool-debian
	$(PROMTOOL) check rules $(MONITORING_DIR)/clusterrebootd-alerts.yaml
	cd $(MONITORING_DIR) && $(PROMTOOL) test rules clusterrebootd-alerts.test.yaml

TEST_TARGETS += monitoring-check test-monitoring
