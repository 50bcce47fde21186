// Package lockinfo is a lock's entries as etcd stores them (Annotation, the
// value of each entry) and as lib/lock's Status reads them (Entry, Info).
// It links no etcd code: the daemon, which links none, decodes and shows
// them as the cluster child reads them (driver/protocol's StatusResult).
package lockinfo

import (
	"encoding/json"
	"time"
)

// Annotation is the JSON value of a lock entry.
type Annotation struct {
	Node       string     `json:"node"`
	PID        int        `json:"pid"`
	BootID     string     `json:"boot_id,omitempty"`
	MachineID  string     `json:"machine_id,omitempty"`
	Purpose    string     `json:"purpose,omitempty"`
	MaxHolders int        `json:"max_holders"`
	QueuedAt   time.Time  `json:"queued_at"`
	AcquiredAt *time.Time `json:"acquired_at,omitempty"`
	// Candidate marks a seat taken to be admitted to a reboot slot (the
	// daemon's cycle, `crd-lock hold --reboot-slot`, the FleetLock server):
	// the admission counts such a seat only for the candidates that joined
	// the line after it. An unmarked seat (a plain `crd-lock hold`,
	// `etcdctl lock`, an older version's) counts for every candidate, whatever
	// its place in line (docs/cluster-protocol.md, "Seats").
	Candidate bool `json:"candidate,omitempty"`
	// V is the protocol version the writer speaks (lib/lock.ProtocolVersion).
	V int `json:"v"`
}

// ParseAnnotation reads a lock entry's value. An entry whose value cannot be
// read, or names no max_holders (etcdctl lock, a foreign writer), allows one
// holder: every reader of the line (the waiter, the admission's count,
// Status) takes it so.
func ParseAnnotation(value []byte) Annotation {
	var a Annotation
	if json.Unmarshal(value, &a) != nil || a.MaxHolders < 1 {
		a.MaxHolders = 1
	}
	return a
}

// Entry is one holder or waiter as Status sees it.
type Entry struct {
	// Entry is the etcd key, <lock key>/<lease id hex>.
	Entry string `json:"entry"`
	Annotation
	// LeaseID is the lease in hex, as etcdctl prints it.
	LeaseID string `json:"lease_id"`
	// TTLRemainingSec is the lease's remaining TTL (-1: already expired,
	// -2: unknown, the lookup failed or was not made).
	TTLRemainingSec int64 `json:"ttl_remaining_sec"`
	// FencingToken is the entry's create revision.
	FencingToken int64 `json:"fencing_token"`
}

// Info is the state of one lock key.
type Info struct {
	Key     string  `json:"key"`
	Holders []Entry `json:"holders"`
	Waiters []Entry `json:"waiters"`
	// Revision is the etcd revision the snapshot was read at.
	Revision int64 `json:"revision"`
}

// Held reports whether anyone holds the lock.
func (i Info) Held() bool { return len(i.Holders) > 0 }

// TTLUnknown is Entry.TTLRemainingSec when the lease's TTL was not read.
const TTLUnknown = -2

// Since is how long the entry has held the lock at now (0 for a waiter).
func (e Entry) Since(now time.Time) time.Duration {
	if e.AcquiredAt == nil {
		return 0
	}
	return now.Sub(*e.AcquiredAt)
}
