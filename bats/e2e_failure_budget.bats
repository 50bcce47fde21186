#!/usr/bin/env bats
# The rollout's rules end to end (docs/rollout.md; issue 30): the failure budget,
# on by default, stops a bad kernel after the first lost node, at every entry
# point (daemons, pipelines, FleetLock); `clusterrebootd resume --reason` lets
# the rollout go on; pacing, the fleet's rate, waves and percentages hold. Real
# daemons, a real 3-member etcd cluster, simulated reboots (bats/lib/sim.bash);
# a node that never comes back is scripts/sim-reboot's no-return.
#
# Each test fails without its rule: E2E_RULES_OFF=1 turns every rule these
# tests are about off (max_failures 0, no pacing, no waves, no percentage), and
# then every test of this file but the control fails (docs/e2e.md "The
# rollout's rules and a mixed fleet").

load lib/common
load lib/etcd
load lib/sim

setup() { sim_e2e_setup; }
teardown() { sim_e2e_teardown; }

# rules YAML [OFF]: the drop-in of a test's rule; with E2E_RULES_OFF=1, OFF
# (default: nothing) in its place.
rules() {
	if [[ "${E2E_RULES_OFF:-}" == 1 ]]; then printf '%s' "${2:-}"; else printf '%s' "$1"; fi
}
# The failure budget is on by default; off, it is max_failures 0.
BUDGET_OFF="rollout: {max_failures: 0}"

# nodes N [YAML]: n1..nN, each with YAML as its drop-in; sets NODES.
nodes() {
	local i
	NODES=()
	for ((i = 1; i <= $1; i++)); do
		sim_node_add "n$i" "${2:-}"
		NODES+=("n$i")
	done
}

# others_of NODE...: the NODES not named.
others_of() {
	local n x skip
	for n in "${NODES[@]}"; do
		skip=""
		for x in "$@"; do [[ $n != "$x" ]] || skip=1; done
		[[ -n $skip ]] || echo "$n"
	done
}

# _records_ge NAME N: NAME's status shows at least N health records.
_records_ge() { (($(sim_status "$1" | jq '.view.nodes | length') >= $2)); }

# assert_halted_by NODE SURVIVOR...: the rollout is halted naming NODE alone,
# kind slot_expired, in every survivor's status and log.
assert_halted_by() {
	local lost=$1 s
	shift
	for s in "$@"; do
		_sim_wait 10 grep -q '"reason":"halted"' "$(sim_log "$s")" || fail "$s never said halted"
	done
	run -0 sim_rollout "$1" '[.halted.failures[] | "\(.node) \(.kind)"] | join(",")'
	assert_output "\"$lost slot_expired\""
	run -0 sim_rollout "$1" '.next.rule'
	assert_output '"halted"'
	run -0 sim_rollout "$1" '.halted.reason'
	assert_output --partial "$lost (slot_expired"
}

@test "a bad kernel with the defaults: 5 daemons, every reboot is lost: exactly one goes down, the fleet halts naming it" {
	nodes 5 "$(rules "" "$BUDGET_OFF")"
	sim_no_return "${NODES[@]}"
	sim_need_reboot "${NODES[@]}"
	sim_start "${NODES[@]}"
	sim_wait_downs 1 30
	local lost survivors
	lost=$(sim_first_down)
	mapfile -t survivors < <(others_of "$lost")
	_sim_wait 5 grep -q "^$lost lost " "$SIM_LEDGER"

	# Its slot runs out after reboot_slot_ttl_sec (60 s): the next admission
	# finds its in-flight record without the slot and halts the fleet.
	_sim_wait 90 grep -q '"reason":"halted"' "$(sim_log "${survivors[0]}")"
	assert_halted_by "$lost" "${survivors[@]}"
	# Clearly past the slot's TTL: every survivor cycles once a second and the
	# lock is free, so without the halt the next would be down by now.
	sleep 10
	assert_equal "$(sim_downs)" 1
	run -0 sim_check_ledger --slot-ttl 60 --expect 1
	local s record
	for s in "${survivors[@]}"; do
		assert_equal "$(sim_reboot_required "$s")" true
		# Its health record says why it does not reboot.
		record=$(sim_status "$s" | jq -r --arg n "$s" '.view.nodes[] | select(.node == $n) | .state + " " + .reason')
		[[ $record == "blocked halted: the rollout halted itself"*"$lost (slot_expired"* ]] || fail "$s's record: $record"
	done
}

# The control of the test above, and of the pacing test below.
@test "control: the same fleet whose nodes come back reboots all five, no halt; its starts are closer than min_interval" {
	nodes 5
	sim_need_reboot "${NODES[@]}"
	sim_start "${NODES[@]}"
	sim_wait_completed 80 "${NODES[@]}"
	run -0 sim_check_ledger --expect 5
	run -0 sim_rollout n1 '[.halted, (.failures | length), .starts_last_hour]'
	assert_output '[null,0,5]'
	# Without min_interval_sec the check of the pacing test fails.
	run -1 sim_check_ledger --min-interval 9
	assert_output --partial "PACING"
}

@test "a halted fleet refuses pipelines (exit 6) and FleetLock clients (423 failed_lock_halted); resume --reason lets all go on, the lost node stays lost" {
	local budget
	budget=$(rules "" "$BUDGET_OFF")
	sim_fleetlock_server fa "$budget"
	local url
	url=$(sim_fleetlock_url fa)
	sim_node_add d1 "$budget"
	sim_node_add d2 "$budget"
	sim_node_add d3 "$budget"
	sim_pipeline_add p1 "$budget"
	sim_pipeline_add p2 "$budget" # never started: the test runs its pipeline by hand
	sim_fleetlock_add f1 default "$url"
	# d1 reboots first and is lost; the others need their reboot while its slot lives.
	sim_no_return d1
	sim_need_reboot d1
	sim_start d1 d2 d3 p1 f1
	sim_wait_downs 1 30
	assert_equal "$(sim_first_down)" d1
	sim_need_reboot d2 d3 p1 f1 p2

	_sim_wait 90 grep -q '"reason":"halted"' "$(sim_log d2)"
	assert_halted_by d1 d2 d3
	# The pipeline node's loop and the FleetLock client are refused too.
	_sim_wait 10 grep -q 'not admitted (rule halted)' "$(sim_log p1)"
	_sim_wait 10 grep -q '"status":"423","answer":{"kind":"failed_lock_halted"' "$(sim_log f1)"
	# By hand: the README's pipeline exits 6 and runs nothing; a FleetLock
	# pre-reboot gets 423 failed_lock_halted.
	run -6 --separate-stderr crd-lock hold --reboot-slot --config "$(sim_node_dir p2)/config.yaml" -- touch "$TEST_DIR/p2-ran"
	[[ "$stderr" == *"not admitted (rule halted)"* ]] || fail "crd-lock hold said: $stderr"
	[[ ! -e "$TEST_DIR/p2-ran" ]]
	run -0 sim_fleetlock_ask "$url" pre-reboot f9 default
	assert_output --regexp '^423 \{"kind":"failed_lock_halted","value":"the rollout halted itself: .*d1 \(slot_expired'
	sleep 5
	assert_equal "$(sim_downs)" 1

	# A plain resume does not end a halt; resume --reason does, audited.
	run -2 sim_ctl d2 resume
	run -0 sim_ctl d2 resume --reason "e2e: d1 had a bad disk, the kernel is fine"
	run -0 sim_rollout d3 '[.halted, .last_resume.reason, (.failures | length)]'
	assert_output '[null,"e2e: d1 had a bad disk, the kernel is fine",0]'
	sim_wait_completed 60 d2 d3
	_sim_wait 60 grep -q '"event":"pipeline_completed"' "$(sim_log p1)"
	_sim_wait 60 grep -q '"event":"steady_state","node":"f1","url":"[^"]*","status":"200","answer":{"result":"unlocked"' "$(sim_log f1)"
	run -0 sim_check_ledger --slot-ttl 60 --expect 5
	# d1 stays lost: no "up", and its failure is before the resume.
	assert_equal "$(grep -c '^d1 up ' "$SIM_LEDGER")" 0
	assert_equal "$(sim_rollout d2 '.halted')" null
}

# Slow: over 80 s, most of it the lost node's slot running out
# bats test_tags=slow
@test "max_holders 2: a failure while two are down halts the fleet; the other comes back, nobody else goes down" {
	local conf
	conf="max_holders: 2
$(rules "" "$BUDGET_OFF")"
	sim_node_add n1 "$conf"
	local i
	for i in 2 3 4; do SIM_BOOT_SEC=30 sim_node_add "n$i" "$conf"; done
	NODES=(n1 n2 n3 n4)
	sim_no_return n1
	sim_need_reboot n1
	sim_start "${NODES[@]}"
	sim_wait_downs 1 30
	# 40 s into n1's slot of 60 s the others need their reboot: one of them
	# goes down beside n1 and is still down (30 s boots) when n1's slot runs out.
	sleep 40
	sim_need_reboot n2 n3 n4
	sim_wait_downs 2 15
	local second rest
	second=$(awk '$2 == "down" { n++; if (n == 2) print $1 }' "$SIM_LEDGER")
	mapfile -t rest < <(others_of n1 "$second")

	_sim_wait 40 grep -q '"reason":"halted"' "$(sim_log "${rest[0]}")"
	# The halt came while the second was down, and names n1 alone: the second's
	# live slot and in-flight record are no failure.
	[[ -z "$(grep "^$second up " "$SIM_LEDGER")" ]] || fail "$second came back before the halt; the failure did not come while two were down"
	assert_halted_by n1 "${rest[@]}"
	sim_wait_completed 40 "$second"
	sleep 5
	assert_equal "$(sim_downs)" 2
	run -0 sim_check_ledger --max 2 --slot-ttl 60 --expect 2
	assert_output --partial "(peak 2)"
	run -0 sim_rollout "$second" '[.halted.failures[].node]'
	assert_output '["n1"]'
}

@test "min_interval_sec 10: the starts in the ledger are at least that far apart" {
	nodes 3 "$(rules "rollout: {min_interval_sec: 10}")"
	sim_need_reboot "${NODES[@]}"
	sim_start "${NODES[@]}"
	sim_wait_completed 80 "${NODES[@]}"
	# 1 s for what lies between the pacing lease's grant (the take) and the
	# ledger's "down" (the reboot command); the leases are etcd's.
	run -0 sim_check_ledger --expect 3 --min-interval 9
	run -0 bash -c "cat '$SIM_DIR'/nodes/*/daemon.log | grep '\"reason\":\"paced\"'"
}

@test "max_starts_per_hour 2: two of four reboot, the others wait paced for the hour" {
	nodes 4 "$(rules "rollout: {max_starts_per_hour: 2}")"
	sim_need_reboot "${NODES[@]}"
	sim_start "${NODES[@]}"
	sim_wait_downs 2 30
	local first second rest
	first=$(sim_first_down)
	second=$(awk '$2 == "down" { n++; if (n == 2) print $1 }' "$SIM_LEDGER")
	sim_wait_completed 30 "$first" "$second"
	mapfile -t rest < <(others_of "$first" "$second")
	# The one holding the lock seat waits under it, paced; the other waits
	# for the seat.
	_sim_wait 10 grep -q '"reason":"paced"' "$(sim_log "${rest[0]}")" "$(sim_log "${rest[1]}")" ||
		fail "neither ${rest[*]} waited paced"
	local paced=${rest[0]}
	grep -q '"reason":"paced"' "$(sim_log "$paced")" || paced=${rest[1]}
	sleep 5
	assert_equal "$(sim_downs)" 2
	run -0 sim_rollout "$paced" '[.starts_last_hour, .next.rule, .next.wait]'
	assert_output '[2,"max_starts_per_hour",true]'
	# It waits until the oldest start's lease of an hour ends.
	local until left
	until=$(sim_rollout "$paced" '.next.until' | tr -d '"')
	left=$(($(date -d "$until" +%s) - $(date +%s)))
	((left > 3000 && left <= 3600)) || fail "waits until $until, $left s from now; want the hour's end"
	run -0 sim_check_ledger --expect 2
}

@test "waves: the canaries (wave 0) reboot before any wave-1 node, and wave_bake_sec 8 after the last of them" {
	local w0 w1 n
	w0=$(rules "rollout: {wave: 0, wave_bake_sec: 8}")
	w1=$(rules "rollout: {wave: 1, wave_bake_sec: 8}")
	sim_node_add c1 "$w0"
	sim_node_add c2 "$w0"
	sim_node_add w1 "$w1"
	sim_node_add w2 "$w1"
	NODES=(c1 c2 w1 w2)
	# The canaries' pre-lock health check fails until hold-back is removed:
	# they need their reboot and cannot have it yet; the wave-1 nodes are ready.
	for n in c1 c2; do
		touch "$(sim_node_dir "$n")/hold-back"
		sim_pre_lock "$n" "[ -e '$(sim_node_dir "$n")/hold-back' ] && exit 1; exit 0"
	done
	sim_need_reboot "${NODES[@]}"
	sim_start "${NODES[@]}"
	for n in w1 w2; do
		_sim_wait 20 grep -q '"reason":"wave"' "$(sim_log "$n")" || fail "$n never waited for its wave"
	done
	sleep 3
	assert_equal "$(sim_downs)" 0
	rm -f "$(sim_node_dir c1)/hold-back" "$(sim_node_dir c2)/hold-back"
	sim_wait_completed 80 "${NODES[@]}"
	run -0 sim_check_ledger --expect 4
	# Every canary was down and back before the first wave-1 node went down, by
	# at least wave_bake_sec (less 1 s: the bake's lease starts at the
	# completion, after the "up"; etcd times it).
	run -0 awk '
		$1 ~ /^c/ && $2 == "up" { if ($3 > lastup) lastup = $3; ups++ }
		$1 ~ /^w/ && $2 == "down" && first == "" { first = $3; before = ups }
		END { printf "%d %.2f\n", before, first - lastup }' "$SIM_LEDGER"
	echo "# canaries back before wave 1: ${output%% *}; wave 1 went down ${output#* } s after the last" >&3
	[[ "${output%% *}" == 2 ]] || fail "wave 1 went down before both canaries were back: $output"
	awk -v gap="${output#* }" 'BEGIN { exit !(gap >= 7) }' || fail "wave 1 went down ${output#* } s after the last canary came back; wave_bake_sec is 8"
}

# overlapped A B: A and B were down at the same time (the ledger).
overlapped() {
	awk -v a="$1" -v b="$2" '
		$2 == "down" { down[$1] = $3 }
		$2 == "up" && ($1 == a || $1 == b) { from[$1] = down[$1]; to[$1] = $3 }
		END { exit !((a in from) && (b in from) && from[a] < to[b] && from[b] < to[a]) }' "$SIM_LEDGER"
}

@test "max_holders \"50%\" of 4 nodes: at most 2 down at once, and 2 reached, also by nodes that queue while two are down" {
	local n
	NODES=()
	for n in n1 n2 n3 n4; do
		SIM_BOOT_SEC=8 sim_node_add "$n" "$(rules 'max_holders: "50%"')"
		NODES+=("$n")
	done
	# Four records first: a percentage is of the nodes the fleet knows.
	sim_start "${NODES[@]}"
	_sim_wait 20 _records_ge n1 4
	sim_need_reboot n1 n2
	sim_wait_downs 2 20
	# n1's and n2's records have run out (3 s) while they are down; their
	# slots still make them two of the four nodes.
	sleep 4
	run -0 sim_rollout n3 '[.max_holders, .group_nodes]'
	assert_output '[2,4]'
	sim_need_reboot n3 n4
	sim_wait_completed 60 "${NODES[@]}"
	run -0 sim_check_ledger --max 2 --expect 4
	assert_output --partial "never more than 2 down at once: OK (peak 2)"
	overlapped n1 n2 || fail "n1 and n2 were never down together"
	overlapped n3 n4 || fail "n3 and n4, which queued while n1 and n2 were down, were never down together"
}
