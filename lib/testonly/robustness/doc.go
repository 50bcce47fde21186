// Package robustness explores the admission to reboot slots the way etcd's
// own tests/robustness explores etcd: simulated nodes of every entry point
// drive the real library code (lib/lock, lib/slot, lib/fleetlock) against one
// real etcd, a seeded scheduler decides which node's next etcd request goes
// next and which fault happens between two requests, and an independent
// checker reads etcd's history of the namespace (a watch from the run's first
// revision, with the previous values) and asserts the fleet's invariants from
// the events alone (docs/testing.md, "Robustness").
//
// A seed decides everything: the fleet (groups, budgets, which nodes of
// which entry point), each node's choices and the interleaving. The
// simulated nodes' unary requests run one at a time, in the order the
// scheduler draws; streams (watches, keepalives) stay asynchronous, leases
// are long, and a lease "running out" is an explicit revocation, so a
// failing seed replays the same schedule.
//
// Only _test.go files import it (lib/testonly/buildtest checks).
package robustness
