# Maintenance and blackout windows (lib/window, crd-window).
#
#   make fuzz          every area's fuzz targets (each adds itself below)
#   make fuzz-window   fuzz the window parser for FUZZTIME (default 30s)
#
# The fuzz seeds also run in every plain `go test` (make unit), so fuzzing
# is not part of TEST_TARGETS. A crasher is written to
# lib/window/testdata/fuzz/FuzzParse/ and replayed by `go test` from then on.

FUZZTIME ?= 30s

.PHONY: fuzz fuzz-window
fuzz: fuzz-window

fuzz-window:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./lib/window/
