package robustness

import (
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// KV is a key's value as etcd stored it.
type KV struct {
	Value                       []byte
	Lease                       int64
	CreateRevision, ModRevision int64
}

// Event is one change of etcd's history: a put (Value, Lease and
// CreateRevision of the new value) or a delete, with the value before it
// (Prev, nil when the key did not exist).
type Event struct {
	// Revision is the transaction's revision (every event of one
	// transaction has the same).
	Revision int64
	Delete   bool
	Key      string
	// Value, Lease and CreateRevision are the new value's (a put).
	Value          []byte
	Lease          int64
	CreateRevision int64
	// Prev is the value before (nil: the key did not exist).
	Prev *KV
}

func eventOf(ev *clientv3.Event) Event {
	e := Event{Revision: ev.Kv.ModRevision, Delete: ev.Type == clientv3.EventTypeDelete, Key: string(ev.Kv.Key),
		Value: ev.Kv.Value, Lease: ev.Kv.Lease, CreateRevision: ev.Kv.CreateRevision}
	if p := ev.PrevKv; p != nil {
		e.Prev = &KV{Value: p.Value, Lease: p.Lease, CreateRevision: p.CreateRevision, ModRevision: p.ModRevision}
	}
	return e
}

// excerpt prints the events of the revisions from..to, short (keys relative
// to the namespace; leases in hex, as etcdctl shows them).
func excerpt(events []Event, ns string, from, to int64) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Revision < from || ev.Revision > to {
			continue
		}
		if ev.Delete {
			fmt.Fprintf(&b, "    rev %d  delete %s\n", ev.Revision, strings.TrimPrefix(ev.Key, ns))
			continue
		}
		v := string(ev.Value)
		if len(v) > 160 {
			v = v[:160] + "…"
		}
		fmt.Fprintf(&b, "    rev %d  put %s = %s (lease %x)\n", ev.Revision, strings.TrimPrefix(ev.Key, ns), v, ev.Lease)
	}
	return b.String()
}
