# The configuration loader (lib/config).
#
#   make fuzz-config        fuzz the loader (main file + a drop-in) for FUZZTIME
#   make fuzz-config-short  the same for FUZZTIME_SHORT (default 5s), in make test
#
# Plain `go test` (make unit) replays the seeds and any crasher saved under
# lib/config/testdata/fuzz/FuzzLoad/; the short run in make test explores a
# little beyond them each time.

FUZZTIME_SHORT ?= 5s

.PHONY: fuzz-config fuzz-config-short
fuzz: fuzz-config
TEST_TARGETS += fuzz-config-short

fuzz-config:
	$(GO) test -run='^$$' -fuzz=FuzzLoad -fuzztime=$(FUZZTIME) ./lib/config/

fuzz-config-short:
	$(GO) test -run='^$$' -fuzz=FuzzLoad -fuzztime=$(FUZZTIME_SHORT) ./lib/config/
