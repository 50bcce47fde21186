package slot

// HoldsDir is where operators' holds live: <ns>holds/ (one key per node,
// a pause-like value {"reason","by","since"}).
func HoldsDir(ns string) string { return ns + "holds/" }

// HoldKey is a node's hold: <ns>holds/<node>.
func HoldKey(ns, node string) string { return HoldsDir(ns) + node }

// RequestsDir is where operators' reboot requests live: <ns>requests/.
func RequestsDir(ns string) string { return ns + "requests/" }

// RequestKey is a node's reboot request: <ns>requests/<node>.
func RequestKey(ns, node string) string { return RequestsDir(ns) + node }
