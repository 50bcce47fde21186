#!/usr/bin/env bats
# scripts/e2e-ledger-check, the judge of every end-to-end suite, on ledgers
# written by hand: each check passes a good ledger and fails a bad one, so a
# suite that relies on it can fail. No etcd, no daemon (part of make bats).

load lib/common

setup() {
	common_setup
	CHECK="$REPO_ROOT/scripts/e2e-ledger-check"
	LEDGER="$TEST_DIR/ledger"
}

# ledger LINE...: the ledger, one event a line.
ledger() { printf '%s\n' "$@" >"$LEDGER"; }

@test "one at a time passes; two down at once fails --max 1 and passes --max 2" {
	ledger "a down 10" "a up 12" "b down 12.5" "b up 14"
	run -0 "$CHECK" --expect 2 "$LEDGER"
	assert_output --partial "never more than 1 down at once: OK (peak 1)"

	ledger "a down 10" "b down 11" "a up 12" "b up 14"
	run -1 "$CHECK" "$LEDGER"
	assert_output --partial "OVERLAP"
	assert_output --partial "never more than 1 down at once: FAILED (peak 2)"
	run -0 "$CHECK" --max 2 "$LEDGER"
}

@test "--expect fails on another number of reboots" {
	ledger "a down 10" "a up 12"
	run -1 "$CHECK" --expect 2 "$LEDGER"
	assert_output --partial "1 reboot(s), expected 2"
}

@test "a lost node stays down, or only until its slot expired with --slot-ttl" {
	ledger "a down 10" "a lost 10.3" "b down 75" "b up 77"
	run -1 "$CHECK" "$LEDGER"
	run -0 "$CHECK" --slot-ttl 60 "$LEDGER"
	assert_output --regexp "a +slot expired"
	# Before the slot could have expired, the next reboot is an overlap.
	ledger "a down 10" "a lost 10.3" "b down 40" "b up 42"
	run -1 "$CHECK" --slot-ttl 60 "$LEDGER"
}

@test "--group-max: each group's budget, from the lines' group field" {
	ledger "a down 10 db" "c down 10.5 web" "d down 11 web" "a up 12 db" "c up 13 web" "d up 13 web" \
		"b down 13.5 db" "b up 15 db"
	run -0 "$CHECK" --max 3 --group-max db=1 --group-max web=2 --expect 4 "$LEDGER"
	assert_output --partial "never more than 1 of group db down at once: OK (peak 1)"
	assert_output --partial "never more than 2 of group web down at once: OK (peak 2)"
	# web's two at once is over a budget of 1; the fleet's total is checked apart.
	run -1 "$CHECK" --max 3 --group-max db=1 --group-max web=1 "$LEDGER"
	assert_output --partial "GROUP OVERLAP"
	assert_output --partial "never more than 1 of group web down at once: FAILED (peak 2)"
	run -1 "$CHECK" --max 2 --group-max db=1 --group-max web=2 "$LEDGER"
	assert_output --partial "never more than 2 down at once: FAILED (peak 3)"
	# Two of db at once.
	ledger "a down 10 db" "b down 11 db" "a up 12 db" "b up 13 db"
	run -1 "$CHECK" --max 2 --group-max db=1 "$LEDGER"
	assert_output --partial "2 nodes of group db down at once (max 1): "
}

@test "--group-max: a lost node of a group is released when its slot expired" {
	ledger "a down 10 db" "a lost 10.3 db" "b down 75 db" "b up 77 db"
	run -0 "$CHECK" --slot-ttl 60 --group-max db=1 "$LEDGER"
	ledger "a down 10 db" "a lost 10.3 db" "b down 40 db" "b up 42 db"
	run -1 "$CHECK" --max 2 --slot-ttl 60 --group-max db=1 "$LEDGER"
	assert_output --partial "GROUP OVERLAP"
}

@test "--min-interval: starts of one group at least SEC apart; other groups apart" {
	ledger "a down 10" "a up 12" "b down 20" "b up 22" "c down 30.5" "c up 32"
	run -0 "$CHECK" --min-interval 10 "$LEDGER"
	assert_output --partial "starts of a group at least 10 s apart: OK (closest 10.00 s)"
	ledger "a down 10" "a up 12" "b down 13" "b up 15"
	run -1 "$CHECK" --min-interval 10 "$LEDGER"
	assert_output --partial "PACING"
	assert_output --partial "b went down 3.00 s after a in the ungrouped fleet (min interval 10 s)"
	assert_output --partial "at least 10 s apart: FAILED (closest 3.00 s)"
	# Per group: db and web may start together.
	ledger "a down 10 db" "c down 10.5 web" "a up 12 db" "c up 12 web" "b down 21 db" "b up 23 db"
	run -0 "$CHECK" --max 2 --min-interval 10 "$LEDGER"
}

@test "a malformed line, or a usage error" {
	ledger "a down 10" "a sideways 11"
	run -1 "$CHECK" "$LEDGER"
	assert_output --partial "malformed line"
	ledger "a down 10 db extra" "a up 11"
	run -1 "$CHECK" "$LEDGER"
	assert_output --partial "malformed line"
	run -2 "$CHECK" --group-max db "$LEDGER"
	run -2 "$CHECK" "$TEST_DIR/no-such-ledger"
}
