// Package driver is the clusterrebootd daemon: the cycle that chains the
// same libraries as the crd-* tools (lib/reboot, lib/detect, lib/window,
// lib/policy, lib/gate) in the order a shell user would chain the tools, the
// post-reboot checks, the reboot history that stops reboot loops, and the
// client side of the cluster child (`crd-lock step …`, see protocol.go).
//
// The daemon process links no etcd, gRPC, net/http or Prometheus client code
// (docs/architecture.md): everything that talks to etcd runs in a short-lived
// child started through the Child interface. driver/cluster, the child side,
// imports this package; this package never imports it.
//
// Every step sits behind a small interface (Deps) so that table tests drive
// the cycle with fakes: step outcomes in, action, blocked reason and exit
// code out.
package driver
