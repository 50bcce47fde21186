# The shipped Prometheus alerting rules, checked and unit-tested by Debian's promtool.
#
#   make monitoring-check   promtool check rules + promtool test rules on packaging/monitoring
#
# Debian 12's `prometheus` package (2.42) ships promtool. Its postinst would
# start (and enable) a Prometheus on :9090; a policy-rc.d answering 101 keeps
# deb-systemd-invoke and invoke-rc.d from starting it (one that already exists
# is left alone), and the service is disabled afterwards, as for etcd-debian
# (mk/etcd.mk). The dashboard's and the rules' metric names are checked against
# the daemon's exposition by a unit test (driver/monitoring_test.go).

MONITORING_DIR := $(ROOT)/packaging/monitoring
PROMTOOL       := /usr/bin/promtool

.PHONY: monitoring-check promtool-debian

promtool-debian:
	@if ! dpkg-query -W -f='$${Status}\n' prometheus 2>/dev/null | grep "install ok installed" >/dev/null; then \
	  policy=/usr/sbin/policy-rc.d; created=; \
	  if [ ! -e $$policy ]; then \
	    printf '#!/bin/sh\n# clusterrebootd make promtool-debian: start no service while installing\nexit 101\n' > $$policy; \
	    chmod 755 $$policy; created=1; \
	  fi; \
	  rc=0; $(ROOT)/scripts/need-apt prometheus || rc=$$?; \
	  if [ -n "$$created" ]; then rm -f $$policy; fi; \
	  [ $$rc -eq 0 ] || exit $$rc; \
	  if [ -d /run/systemd/system ]; then systemctl disable --now prometheus.service >/dev/null 2>&1 || true; \
	  elif command -v update-rc.d >/dev/null && [ -e /etc/init.d/prometheus ]; then update-rc.d prometheus disable >/dev/null 2>&1 || true; fi; \
	fi
	@$(PROMTOOL) --version 2>&1 | sed -n 1p

monitoring-check: promtool-debian
	$(PROMTOOL) check rules $(MONITORING_DIR)/clusterrebootd-alerts.yaml
	cd $(MONITORING_DIR) && $(PROMTOOL) test rules clusterrebootd-alerts.test.yaml

TEST_TARGETS += monitoring-check
