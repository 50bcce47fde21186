package robustness

import (
	"encoding/json"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/clusterrebootd/clusterrebootd/lib/lock"
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

// lockWait recognises lib/lock's read of the line ahead of a waiter (one
// transaction: its own entry, then the entries created before it, newest
// first, max_holders+aheadPage of them) and decides from the answer, as
// lib/lock's entriesAhead does, whether the waiter now waits on its watch.
// nil: it does not (it holds the lock now, its entry is gone, or it reads
// another page of the line next, which is a request again).
func lockWait(req, reply any, err error) *lineWait {
	q, ok := req.(*pb.TxnRequest)
	resp, ok2 := reply.(*pb.TxnResponse)
	if !ok || !ok2 || err != nil || len(q.Compare) != 0 || len(q.Success) != 2 || len(resp.Responses) != 2 {
		return nil
	}
	own, line := q.Success[0].GetRequestRange(), q.Success[1].GetRequestRange()
	if own == nil || line == nil || line.MaxCreateRevision == 0 || line.Limit <= aheadPage ||
		line.SortTarget != pb.RangeRequest_CREATE || line.SortOrder != pb.RangeRequest_DESCEND {
		return nil
	}
	if len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
		return nil // its entry is gone: lib/lock asks why (a request)
	}
	key := strings.TrimSuffix(string(line.Key), "/")
	maxHolders := int(line.Limit) - aheadPage
	kvs := resp.Responses[1].GetResponseRange().GetKvs()
	limit := maxHolders
	var near []string
	for _, kv := range kvs {
		if !lock.IsEntry(key, string(kv.Key)) || len(near) == maxHolders {
			continue
		}
		near = append(near, string(kv.Key))
		limit = min(limit, entryMaxHolders(kv.Value))
	}
	w := &lineWait{entry: string(own.Key), ahead: near}
	switch {
	case len(near) == maxHolders:
		return w
	case int64(len(kvs)) < line.Limit && len(near) >= limit:
		return w
	}
	return nil
}

// entryMaxHolders is an entry's max_holders as lib/lock reads it: one when
// its annotation cannot be read.
func entryMaxHolders(value []byte) int {
	var a struct {
		MaxHolders int `json:"max_holders"`
	}
	if json.Unmarshal(value, &a) != nil || a.MaxHolders < 1 {
		return 1
	}
	return a.MaxHolders
}
