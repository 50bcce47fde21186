package main

import "strings"

// writeByHand writes the section of docs/performance.md for the figures
// that `make bench` does not measure: each was measured once, by hand,
// while a design choice was made. The code names this section rather than
// the figure, so that a figure goes stale in one place, where it says how to
// measure it again.
func writeByHand(w *strings.Builder) {
	w.WriteString(byHand)
}

const byHand = `## Figures measured by hand

` + "`make bench`" + ` does not measure these again: each was measured once, while the design choice beside it was
made, on the 2-core reference machine. The code refers to this section instead of repeating the figure. Measure
again before building on one.

| figure | how it was measured | when | the choice it supports |
|---|---|---|---|
| package-level regular expressions in lib/config cost the daemon 17 ms and 288 KB at every start (idle VmRSS 6.2 → 5.1 MiB once they and package net were gone) | idle clusterrebootd's VmRSS and GODEBUG=inittrace=1, before and after | commit 8fbf73f, 2026-11-30 | lib/config checks names and addresses by hand (` + "`validName`" + `) |
| linking the Prometheus client library: a ticker-only Go program 2.2 MiB idle VmRSS, the same linking client_golang 7.9 MiB (~6 MiB more) | idle VmRSS of a ticker-only program with and without the import, CGO_ENABLED=0, -s -w | docs/architecture.md, "Two processes" | lib/metrics, a small exposition writer |
| charmbracelet/log: +1.5 MiB idle VmRSS (its terminal-styling dependencies' initialisation); log/slog: +0.4 MiB | the same | docs/decisions.md | lib/logging is log/slog |
| a package-level map of the exit codes' names: about 0.1 ms of crd-detect's initialisation | GODEBUG=inittrace=1 | commit b47eaf7, 2026-11-30 | lib/exitcode's ` + "`Code.Name`" + ` is a switch |
| GOMAXPROCS 1: a third fewer context switches in an idle daemon's burst (with the pidfd wait, the memfds and one trim per burst together: ~77 → ~39) | three daemons side by side, check_interval_sec 2, context switches of ` + "`/proc/PID/task/*/status`" + ` over 60 s | commit d48bcbc, 2026-11-30 | ` + "`clusterrebootd run`" + ` sets GOMAXPROCS 1 unless the environment does |
| the daemon's collection after each cycle (debug.FreeOSMemory) costs well under a millisecond on its small heap | soak run at a 1-second cadence (docs/soak.md) | commit 5a4bc21, 2026-11-30 | the daemon collects and returns free heap pages after each cycle |
| 22 idle daemons forking publish children made crd-detect's start-to-exit ~35 % slower | ` + "`make bench`" + ` with the idle processes running during the start-up rows, against a run without | commit d48bcbc, 2026-11-30 | ` + "`make bench`" + ` measures the active figures first and the idle processes after, alone |
| linking shoutrrr (notifications) into crd-lock: the idle serve-metrics child 13.6 → 14.8 MiB VmRSS (three runs each: 13952/13988/13960 kB → 15080/15132/15108 kB), crd-lock 15.8 → 17.3 MB; the daemon links neither | VmRSS of ` + "`crd-lock step serve-metrics`" + ` 3 s after start, built at c8b003d and at 37def69, CGO_ENABLED=0, -s -w | 2026-12-01 | notifications are sent from the cluster child, never the daemon (docs/notifications.md); a lighter separate sender is not worth a fourth process |
| ` + "`make bench-tools-time`" + ` (the start-up rows alone) takes about 20 s | wall clock | bench/crdbench | — |

`
