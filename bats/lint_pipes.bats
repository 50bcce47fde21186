#!/usr/bin/env bats
# scripts/lint-pipes, the guard `make lint` runs: it finds a pipe into a reader
# that can exit before its writer (under pipefail, the writer's SIGPIPE fails
# the pipeline at random), and passes what reads all of its input.

load lib/common

LINT="$REPO_ROOT/scripts/lint-pipes"

setup() {
	TEST_DIR="$BATS_TEST_TMPDIR"
}

@test "each early reader is found, with file and line" {
	cat >"$TEST_DIR/bad.mk" <<'MK'
a:
	@$(ETCD) --version | head -1
	@dpkg-query -W x | grep -c ok | grep -qx 2
	@x | grep -m1 y
	@x | grep --quiet y
	@x | grep -l y
	@x | sed 3q
	@x | sed -n '/y/{p;q}'
	@x | awk '/fpr/ { print $$10; exit }'
	@x | { read -r first; }
	@x |
	  head -n 1
	@x | \
	  LC_ALL=C head -c 10
MK
	run -1 "$LINT" "$TEST_DIR/bad.mk"
	assert_line --index 0 --partial "bad.mk:2: a pipe into head"
	assert_line --index 1 --partial "bad.mk:3: a pipe into grep -q/-m/-l"
	assert_line --index 2 --partial "bad.mk:4: a pipe into grep"
	assert_line --index 3 --partial "bad.mk:5: a pipe into grep"
	assert_line --index 4 --partial "bad.mk:6: a pipe into grep"
	assert_line --index 5 --partial "bad.mk:7: a pipe into sed with q"
	assert_line --index 6 --partial "bad.mk:8: a pipe into sed with q"
	assert_line --index 7 --partial "bad.mk:9: a pipe into awk with exit"
	assert_line --index 8 --partial "bad.mk:10: a pipe into read"
	assert_line --index 9 --partial "bad.mk:12: a pipe into head"
	assert_line --index 10 --partial "bad.mk:14: a pipe into head"
	assert_equal "${#lines[@]}" 11
}

@test "readers that read all of their input pass" {
	cat >"$TEST_DIR/good.sh" <<'SH'
#!/bin/bash
set -euo pipefail
x | sed -n 1p
x | grep -c ok | grep -x 2 >/dev/null
x | grep y >/dev/null
x | tail -1
x || head -1 file
x |& cat
x | awk '/fpr/ && !done { print $10; done = 1 }'
x | while read -r l; do :; done
# x | head -1: a comment is not a pipeline
x | head -1 # lint-pipes: ok, x writes one short line
cat <<EOT
x | head -1 inside a here-document is data
EOT
SH
	run -0 "$LINT" "$TEST_DIR/good.sh"
	assert_output ""
}

@test "the project's own shell files pass" {
	run -0 "$LINT"
	assert_output ""
}

@test "an unreadable file is a usage error" {
	run -2 "$LINT" "$TEST_DIR/missing"
	assert_output --partial "cannot read"
}
