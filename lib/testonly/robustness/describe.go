package robustness

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// request is one step an actor waits to take: a unary etcd request (method
// and req), or a step of its own (label).
type request struct {
	method string
	req    any
	label  string
}

// names gives leases stable names (L1, L2, … in the order the schedule
// first meets them) and keys short ones (relative to the namespace, a lease
// in a key by its name), so that a schedule reads the same in every run of
// its seed.
type names struct {
	ns string
	// base is the revision before the run: revisions in keys (a failure
	// record's id) are shown relative to it.
	base   int64
	mu     sync.Mutex
	leases map[int64]string
}

func newNames(ns string, base int64) *names {
	return &names{ns: ns, base: base, leases: map[int64]string{}}
}

// lease is id's name.
func (n *names) lease(id int64) string {
	if id == 0 {
		return "no lease"
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.leases[id]; ok {
		return s
	}
	s := fmt.Sprintf("L%d", len(n.leases)+1)
	n.leases[id] = s
	return s
}

// key is k relative to the namespace, its last segment named when it is a
// lease (a lock entry, a start record).
func (n *names) key(k string) string {
	k = strings.TrimPrefix(k, n.ns)
	i := strings.LastIndex(k, "/")
	if i < 0 {
		return k
	}
	last := k[i+1:]
	if strings.HasPrefix(k, "rollout/failures/") {
		if rev, err := strconv.ParseInt(last, 10, 64); err == nil && n.base > 0 {
			return fmt.Sprintf("%s@%d", k[:i+1], rev-n.base)
		}
	}
	if len(last) >= 12 {
		if id, err := strconv.ParseInt(last, 16, 64); err == nil {
			return k[:i+1] + n.lease(id)
		}
	}
	return k
}

func (n *names) keys(ks []string) string {
	out := make([]string, 0, len(ks))
	for _, k := range ks {
		out = append(out, n.key(k))
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

// describe says what a request does, in the namespace's terms.
func (n *names) describe(r request) string {
	if r.method == "" {
		return r.label
	}
	switch q := r.req.(type) {
	case *pb.RangeRequest:
		return "get " + n.rangeKey(q.Key, q.RangeEnd)
	case *pb.PutRequest:
		return "put " + n.key(string(q.Key))
	case *pb.DeleteRangeRequest:
		return "del " + n.rangeKey(q.Key, q.RangeEnd)
	case *pb.TxnRequest:
		return n.txn(q)
	case *pb.LeaseGrantRequest:
		return fmt.Sprintf("grant a lease of %ds", q.TTL)
	case *pb.LeaseRevokeRequest:
		return "revoke " + n.lease(q.ID)
	case *pb.LeaseTimeToLiveRequest:
		return "ttl of " + n.lease(q.ID)
	}
	return r.method[strings.LastIndex(r.method, "/")+1:]
}

func (n *names) rangeKey(key, end []byte) string {
	if len(end) > 0 {
		return n.key(string(key)) + "*"
	}
	return n.key(string(key))
}

// txn names a transaction: what kind of step it is (kind), and its writes.
func (n *names) txn(q *pb.TxnRequest) string {
	kind := txnKind(n.ns, q)
	var writes []string
	for _, op := range q.Success {
		switch {
		case op.GetRequestPut() != nil:
			writes = append(writes, "put "+n.key(string(op.GetRequestPut().Key)))
		case op.GetRequestDeleteRange() != nil:
			d := op.GetRequestDeleteRange()
			writes = append(writes, "del "+n.rangeKey(d.Key, d.RangeEnd))
		case op.GetRequestTxn() != nil:
			writes = append(writes, "txn")
		}
	}
	s := "txn " + kind
	if len(q.Compare) > 0 {
		s += fmt.Sprintf(" if(%d)", len(q.Compare))
	}
	if len(writes) > 0 {
		s += " " + strings.Join(writes, ", ")
	} else {
		s += fmt.Sprintf(" (%d reads)", len(q.Success))
	}
	return s
}

// The kinds of transaction the faults aim at.
const (
	txnCount = "count"
	txnTake  = "take"
	txnOther = "-"
)

// txnKind recognises lib/slot's count (the one read of everything the
// rules decide on: a range over the lock's entries by create revision, then
// the slots and the rest) and take (a guarded put of a slot).
func txnKind(ns string, q *pb.TxnRequest) string {
	if len(q.Compare) == 0 && len(q.Success) >= 10 {
		if r := q.Success[0].GetRequestRange(); r != nil && r.SortTarget == pb.RangeRequest_CREATE {
			if r1 := q.Success[1].GetRequestRange(); r1 != nil && string(r1.Key) == ns+"rebooting/" {
				return txnCount
			}
		}
	}
	for _, op := range q.Success {
		if p := op.GetRequestPut(); p != nil && strings.HasPrefix(string(p.Key), ns+"rebooting/") {
			return txnTake
		}
	}
	return txnOther
}

// outcome says how a request ended.
func (n *names) outcome(reply any, err error) (string, int64) {
	if err != nil {
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return "error: " + msg, 0
	}
	switch p := reply.(type) {
	case *pb.RangeResponse:
		return fmt.Sprintf("%d found", p.Count), p.Header.GetRevision()
	case *pb.TxnResponse:
		if p.Succeeded {
			return "ok", p.Header.GetRevision()
		}
		return "refused", p.Header.GetRevision()
	case *pb.LeaseGrantResponse:
		return n.lease(p.ID), p.Header.GetRevision()
	case *pb.LeaseTimeToLiveResponse:
		if p.TTL < 0 {
			return "gone", p.Header.GetRevision()
		}
		return "alive", p.Header.GetRevision()
	case *pb.PutResponse:
		return "ok", p.Header.GetRevision()
	case *pb.DeleteRangeResponse:
		return fmt.Sprintf("%d deleted", p.Deleted), p.Header.GetRevision()
	case *pb.LeaseRevokeResponse:
		return "ok", p.Header.GetRevision()
	}
	return "ok", 0
}
