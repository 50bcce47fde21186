# The configuration loader (lib/config).
#
#   make fuzz-config        fuzz the loader (main file + a drop-in) for FUZZTIME
#   make fuzz-config-short  the same for FUZZTIME_SHORT (default 5000x: five
#                           thousand inputs, a few seconds), in make test
#
# Plain `go test` (make unit) replays the seeds and any crasher saved under
# lib/config/testdata/fuzz/FuzzLoad/; the short run in make test explores a
# little beyond them each time.
#
# The short run counts inputs, not seconds. With a duration, Go's fuzzing
# coordinator before Go 1.27 can report its own deadline as a failure ("---
# FAIL: FuzzLoad (6.01s) context deadline exceeded", no input written): it
# compares the deadline's error with the workers' context before that
# context is cancelled (go.dev/issue/75804). A clean clone's make test of
# a087b6f failed so on go1.26.8. A count sets a limit and no deadline, so
# that path is never taken; a loader that hangs still fails, at go test's
# -timeout. A bare "context deadline exceeded" with no failing input from
# `make fuzz-config FUZZTIME=30s` is that defect, not the loader's.

FUZZTIME_SHORT ?= 5000x

.PHONY: fuzz-config fuzz-config-short
fuzz: fuzz-config
TEST_TARGETS += fuzz-config-short

fuzz-config:
	$(GO) test -run='^$$' -fuzz=FuzzLoad -fuzztime=$(FUZZTIME) ./lib/config/

fuzz-config-short:
	$(GO) test -run='^$$' -fuzz=FuzzLoad -fuzztime=$(FUZZTIME_SHORT) ./lib/config/
