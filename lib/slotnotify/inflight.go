package slotnotify

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A node that never comes back cannot say so. While slot_expired is
// configured, a node that takes its slot also writes InflightKey (on a
// lease of three slot TTLs, so that it cleans itself up) and deletes it
// when it completes or aborts, before it frees the slot. Any daemon's
// publish that finds an in-flight record whose slot is gone although
// reboot_slot_ttl_sec has passed sends slot_expired, once per cluster.

// Inflight is the value of InflightKey.
type Inflight struct {
	Node         string    `json:"node"`
	Lease        string    `json:"lease_id"`
	Since        time.Time `json:"since"`
	TTLSec       int       `json:"ttl_sec"`
	FencingToken int64     `json:"fencing_token,omitempty"`
}

// InflightDir holds the reboots in flight.
func InflightDir(ns string) string { return Dir(ns) + "inflight/" }

// InflightKey is node's in-flight record.
func InflightKey(ns, node string) string { return InflightDir(ns) + node }

// MarkInflight writes rec as ns's in-flight record of rec.Node.
func MarkInflight(ctx context.Context, client *clientv3.Client, ns string, rec Inflight) error {
	val, _ := json.Marshal(rec)
	lease, err := client.Grant(ctx, int64(3*rec.TTLSec))
	if err == nil {
		_, err = client.Put(ctx, InflightKey(ns, rec.Node), string(val), clientv3.WithLease(lease.ID))
	}
	return err
}

// ClearInflight deletes node's in-flight record.
func ClearInflight(ctx context.Context, client *clientv3.Client, ns, node string) error {
	_, err := client.Delete(ctx, InflightKey(ns, node))
	return err
}
