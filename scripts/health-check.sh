#!/bin/sh
# Reference health script for clusterrebootd: copy it, adapt it, point
# health_script at your copy (root-owned, mode 0755). Contract: docs/health-gate.md.
#
# It allows a reboot (exit 0) only when all enabled checks pass:
#   1. etcd has quorum: more than half of the cluster's members are healthy
#      (`etcdctl endpoint health --cluster`, or etcd's JSON gateway via curl);
#   2. at least one fallback node other than this one is up (FALLBACK_SET);
#   3. an HTTP SLA figure is within its threshold.
# Any failure exits 1 with one line on stderr saying why: that line becomes the
# reason shown in clusterrebootd's logs and status.
#
# The daemon passes a fixed environment (NODE_NAME, CLUSTER_SIZE, FALLBACK_SET,
# ETCD_ENDPOINTS, PHASE, HEALTH_TIMEOUT_SEC, ...). Settings of this
# script go in HC_CONFIG (default /etc/clusterrebootd/health-check.env), a
# shell fragment of these variables:
#
#   HC_ETCD=auto          auto | etcdctl | curl | off
#   HC_ETCDCTL_ARGS=""    e.g. "--cacert /etc/hc/ca.pem --cert /etc/hc/ro.pem --key /etc/hc/ro.key"
#                         (read-only credentials of the script, never the daemon's)
#   HC_CURL_ARGS=""       extra curl arguments, e.g. "--cacert /etc/hc/ca.pem"
#   HC_FALLBACK_URL=""    URL template with {node}, e.g. "http://{node}:8080/healthz";
#                         empty: the fallback check pings the node
#   HC_SLA_URL=""         URL answering with one number (e.g. availability in %); empty: no SLA check
#   HC_SLA_MIN=""         the number must be >= this (e.g. 99.9) ...
#   HC_SLA_MAX=""         ... and/or <= this (e.g. an error rate of 0.01)
#   HC_TIMEOUT=5          seconds per network call (kept below HEALTH_TIMEOUT_SEC)
set -u

HC_CONFIG=${HC_CONFIG:-/etc/clusterrebootd/health-check.env}
HC_ETCD=auto
HC_ETCDCTL_ARGS=
HC_CURL_ARGS=
HC_FALLBACK_URL=
HC_SLA_URL=
HC_SLA_MIN=
HC_SLA_MAX=
HC_TIMEOUT=5
# shellcheck disable=SC1090
[ -r "$HC_CONFIG" ] && . "$HC_CONFIG"

NODE_NAME=${NODE_NAME:-$(hostname)}
FALLBACK_SET=${FALLBACK_SET:-}
ETCD_ENDPOINTS=${ETCD_ENDPOINTS:-http://127.0.0.1:2379}
PHASE=${PHASE:-pre-lock}

fail() {
	echo "$PHASE: $*" >&2
	exit 1
}

have() { command -v "$1" >/dev/null 2>&1; }

# split "a,b,c" into lines
lines() { echo "$1" | tr ',' '\n' | sed '/^[[:space:]]*$/d; s/^[[:space:]]*//; s/[[:space:]]*$//'; }

check_etcd() {
	mode=$HC_ETCD
	if [ "$mode" = auto ]; then
		if have etcdctl; then mode=etcdctl; elif have curl; then mode=curl; else
			fail "neither etcdctl nor curl is installed; cannot check etcd quorum (set HC_ETCD=off to skip)"
		fi
	fi
	case $mode in
	off) return 0 ;;
	etcdctl)
		# One line per member: "<url> is healthy: ..." or "... is unhealthy: ...".
		# shellcheck disable=SC2086
		out=$(ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" --command-timeout="${HC_TIMEOUT}s" \
			$HC_ETCDCTL_ARGS endpoint health --cluster 2>&1)
		total=$(echo "$out" | grep -c ' is \(un\)\{0,1\}healthy')
		healthy=$(echo "$out" | grep -c ' is healthy')
		;;
	curl)
		total=0
		healthy=0
		for ep in $(lines "$ETCD_ENDPOINTS"); do
			total=$((total + 1))
			# shellcheck disable=SC2086
			if curl -fsS --max-time "$HC_TIMEOUT" $HC_CURL_ARGS "$ep/health" 2>/dev/null | grep '"health": *"true"' >/dev/null; then
				healthy=$((healthy + 1))
			fi
		done
		;;
	*) fail "HC_ETCD=$mode: use auto, etcdctl, curl or off" ;;
	esac
	[ "$total" -gt 0 ] || fail "etcd: no member answered at $ETCD_ENDPOINTS"
	[ $((healthy * 2)) -gt "$total" ] || fail "etcd has no quorum: $healthy of $total members healthy"
}

node_up() {
	if [ -n "$HC_FALLBACK_URL" ]; then
		url=$(echo "$HC_FALLBACK_URL" | sed "s/{node}/$1/g")
		# shellcheck disable=SC2086
		curl -fsS -o /dev/null --max-time "$HC_TIMEOUT" $HC_CURL_ARGS "$url" 2>/dev/null
	else
		have ping || fail "ping is not installed; set HC_FALLBACK_URL to check the fallback nodes over HTTP"
		ping -c 1 -W "$HC_TIMEOUT" "$1" >/dev/null 2>&1
	fi
}

check_fallback() {
	[ -n "$FALLBACK_SET" ] || return 0
	others=0
	for n in $(lines "$FALLBACK_SET"); do
		[ "$n" = "$NODE_NAME" ] && continue
		others=$((others + 1))
		node_up "$n" && return 0
	done
	# This node is the only fallback: nothing to protect by this check.
	[ "$others" -eq 0 ] && return 0
	fail "no fallback node other than $NODE_NAME is up (FALLBACK_SET=$FALLBACK_SET)"
}

check_sla() {
	[ -n "$HC_SLA_URL" ] || return 0
	have curl || fail "curl is not installed; cannot check the SLA at $HC_SLA_URL"
	# shellcheck disable=SC2086
	value=$(curl -fsS --max-time "$HC_TIMEOUT" $HC_CURL_ARGS "$HC_SLA_URL" 2>/dev/null | sed -n 1p | tr -d '[:space:]')
	printf '%s\n' "$value" | grep -E '^-?[0-9]+(\.[0-9]+)?$' >/dev/null || fail "SLA endpoint $HC_SLA_URL did not answer with a number (got '$value')"
	if [ -n "$HC_SLA_MIN" ] && ! awk -v v="$value" -v m="$HC_SLA_MIN" 'BEGIN { exit !(v >= m) }'; then
		fail "SLA $value is below the minimum $HC_SLA_MIN ($HC_SLA_URL)"
	fi
	if [ -n "$HC_SLA_MAX" ] && ! awk -v v="$value" -v m="$HC_SLA_MAX" 'BEGIN { exit !(v <= m) }'; then
		fail "SLA $value is above the maximum $HC_SLA_MAX ($HC_SLA_URL)"
	fi
}

check_etcd
check_fallback
check_sla
echo "$PHASE: healthy (etcd quorum, fallback, SLA checks passed)" >&2
exit 0
