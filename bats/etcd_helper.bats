#!/usr/bin/env bats
# bats/lib/etcd.bash, which the integration and end-to-end suites build on:
# throwaway etcd servers on free loopback ports that come up healthy and are
# gone again after etcd_stop_all. Runs .tools/bin/etcd (make etcd), or
# $ETCD_TEST_BIN (e.g. /usr/bin/etcd after make etcd-debian).

load lib/common
load lib/etcd

setup() {
	common_setup
	ETCD_TEST_DIR="$TEST_DIR/etcd"
}

teardown() {
	etcd_stop_all
}

# running_members: how many servers with data in this test's directory still run.
running_members() {
	local pid n=0
	for pid in "${_etcd_pids[@]}"; do
		[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && n=$((n + 1))
	done
	echo "$n"
}

@test "one member: healthy on a loopback port, keys can be written and read" {
	etcd_start
	assert_regex "$ETCD_ENDPOINT" '^http://127\.0\.0\.1:[0-9]+$'
	assert_equal "$ETCD_ENDPOINTS" "$ETCD_ENDPOINT"
	run -0 etcdctl_clean --endpoints "$ETCD_ENDPOINTS" put /bats/k v
	run -0 etcdctl_clean --endpoints "$ETCD_ENDPOINTS" get --print-value-only /bats/k
	assert_output "v"
}

@test "ETCD_* variables of the caller do not reach the server or etcdctl" {
	export ETCD_NAME=wrong ETCD_DATA_DIR=/nonexistent ETCDCTL_ENDPOINTS=http://127.0.0.1:1
	etcd_start
	run -0 etcdctl_clean --endpoints "$ETCD_ENDPOINT" endpoint health
	refute_output --partial "127.0.0.1:1 "
	[[ -d "$ETCD_TEST_DIR/m1.etcd" ]]
}

@test "three members on distinct ports; a killed member comes back and catches up" {
	etcd_cluster_start
	IFS=, read -ra urls <<<"$ETCD_ENDPOINTS"
	assert_equal "${#urls[@]}" 3
	run -0 bash -c 'printf "%s\n" "$@" | sort -u | wc -l' _ "${_etcd_client_ports[@]}" "${_etcd_peer_ports[@]}"
	assert_output 6
	run -0 etcdctl_clean --endpoints "$ETCD_ENDPOINTS" member list
	assert_equal "${#lines[@]}" 3

	etcd_member_kill 2
	assert_equal "$(running_members)" 2
	# Member 2 may have been the leader: wait for the other two to elect one.
	etcd_wait_healthy "${urls[0]}" "${urls[2]}"
	run -0 etcdctl_clean --endpoints "${urls[0]}" --command-timeout=15s put /bats/after-kill yes
	etcd_member_start 2
	# A linearizable read on member 2 waits until it has applied the put.
	run -0 etcdctl_clean --endpoints "${urls[1]}" --command-timeout=15s get --print-value-only /bats/after-kill
	assert_output "yes"
}

@test "etcd_stop_all stops every member and frees the ports" {
	etcd_cluster_start
	local port=${_etcd_client_ports[1]}
	etcd_stop_all
	assert_equal "$(running_members)" 0
	run ! _etcd_port_in_use "$port"
}
