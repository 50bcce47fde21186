package robustness

import (
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
)

// lineWait is an actor waiting in a lock's line: lib/lock read the entries
// ahead of its own, found no room, and now waits on a watch for one of them
// (or its own) to go. No request of its own ends that wait, so the
// scheduler must know of it: it wakes the actor once an entry it watches is
// gone, and counts it as stuck if nobody is left to free one.
type lineWait struct {
	entry string
	ahead []string
}

// aheadPage is lib/lock's page of entries read ahead of a waiter beyond its
// max_holders (lock.aheadPage): the read's limit is max_holders plus this.
const aheadPage = 16

// lockWait recognises lib/lock's reads of the line ahead of a waiter and
// decides from the answer, as lib/lock's entriesAhead and waitTurn do,
// whether the waiter now waits on its watch. nil: it does not (it holds the
// lock now, its entry is gone, or a request of its own follows: another
// page of the line, or the values of the entries ahead).
//
// The first read is one transaction: its own entry (counted), then the
// keys of the entries created before it, newest first,
// max_holders+aheadPage of them. With max_holders of them ahead it waits.
// With fewer, and the line ahead ended, the second read is their values at
// the same revision (lockValues).
func lockWait(req, reply any, err error) *lineWait {
	q, ok := req.(*pb.TxnRequest)
	resp, ok2 := reply.(*pb.TxnResponse)
	if !ok || !ok2 || err != nil || len(q.Compare) != 0 || len(q.Success) < 2 || len(resp.Responses) != len(q.Success) {
		return nil
	}
	if w := lockValues(q, resp); w != nil {
		return w
	}
	if len(q.Success) != 2 {
		return nil
	}
	own, line := q.Success[0].GetRequestRange(), q.Success[1].GetRequestRange()
	if own == nil || line == nil || line.MaxCreateRevision == 0 || line.Limit <= aheadPage ||
		line.SortTarget != pb.RangeRequest_CREATE || line.SortOrder != pb.RangeRequest_DESCEND {
		return nil
	}
	if resp.Responses[0].GetResponseRange().GetCount() == 0 {
		return nil // its entry is gone: lib/lock asks why (a request)
	}
	key := strings.TrimSuffix(string(line.Key), "/")
	maxHolders := int(line.Limit) - aheadPage
	var near []string
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		if lock.IsEntry(key, string(kv.Key)) && len(near) < maxHolders {
			near = append(near, string(kv.Key))
		}
	}
	if len(near) == maxHolders {
		return &lineWait{entry: string(own.Key), ahead: near}
	}
	return nil
}

// lockValues recognises lib/lock's read of the values of the entries ahead
// of a waiter (fewer than its max_holders, the line ahead ended): its own
// entry counted at a revision, then each entry ahead at that revision. It
// waits when they are as many as the smallest max_holders among them.
func lockValues(q *pb.TxnRequest, resp *pb.TxnResponse) *lineWait {
	own := q.Success[0].GetRequestRange()
	if own == nil || !own.CountOnly || own.Revision == 0 || len(own.RangeEnd) != 0 {
		return nil
	}
	lockKey := string(own.Key)
	lockKey = lockKey[:max(0, strings.LastIndex(lockKey, "/"))]
	w := &lineWait{entry: string(own.Key)}
	limit := 0
	for i, op := range q.Success[1:] {
		r := op.GetRequestRange()
		if r == nil || r.CountOnly || r.Revision != own.Revision || len(r.RangeEnd) != 0 || !lock.IsEntry(lockKey, string(r.Key)) {
			return nil
		}
		w.ahead = append(w.ahead, string(r.Key))
		for _, kv := range resp.Responses[1+i].GetResponseRange().GetKvs() {
			if m := lockinfo.ParseAnnotation(kv.Value).MaxHolders; limit == 0 || m < limit {
				limit = m
			}
		}
	}
	if resp.Responses[0].GetResponseRange().GetCount() == 0 || len(w.ahead) < limit {
		return nil
	}
	return w
}
