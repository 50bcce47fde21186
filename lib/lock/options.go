package lock

import (
	"math/rand/v2"
	"os"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// FromConfig is the one builder of lock options from a configuration, for
// the tools and the daemon's cluster step alike: the group's lock key,
// max_holders, lock_ttl_sec, the backoff, the request timeout
// (etcd_dial_timeout_sec, else 5 s) and the annotation (node, pid, and this
// boot's and machine's ids, read by the caller under its file system root).
// The caller adds Purpose, Now and the callbacks. A max_holders given as a
// percentage gives one seat here: a caller that knows the fleet's size sets
// MaxHolders to the percentage of it (lib/slot Fleet.Seats).
func FromConfig(cfg config.Config, bootID, machineID string) Options {
	rpc := time.Duration(cfg.EtcdDialTimeoutSec) * time.Second
	if rpc <= 0 {
		rpc = 5 * time.Second
	}
	return Options{
		Key:        cfg.LockKeyForGroup(),
		MaxHolders: cfg.MaxHolders.Of(1),
		TTL:        time.Duration(cfg.LockTTLSec) * time.Second,
		Node:       cfg.NodeName,
		PID:        os.Getpid(),
		BootID:     bootID,
		MachineID:  machineID,
		Backoff: Backoff{
			Min:  time.Duration(cfg.BackoffMinSec) * time.Second,
			Max:  time.Duration(cfg.BackoffMaxSec) * time.Second,
			Rand: rand.Float64,
		},
		RPCTimeout: rpc,
	}
}
