package slot

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/atomicfile"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// The fleet's rules as its nodes are configured (docs/rollout.md, "Whose
// rules"): each daemon writes <ns>rules/<node> whenever its rules change
// (publish, in the record's transaction), on a lease of a week that it
// renews once a day, so that an admission learns the strictest rules of
// the fleet without reading every health record. The keys change when
// configurations do, not when nodes publish or reboot: an admitting
// process keeps the distinct rule sets it read (RulesCache) and reads them
// again only when the keys' count or newest revision moved. A node that
// leaves the fleet keeps counting for up to a week (the safe side), or
// until an operator deletes its key (docs/runbooks.md).

// RulesDir is <ns>rules/.
func RulesDir(ns string) string { return ns + "rules/" }

// RulesKey is node's rules key.
func RulesKey(ns, node string) string { return RulesDir(ns) + node }

// NodeRules is a rules key's value: the node's group and rules.
type NodeRules struct {
	Group string       `json:"group"`
	Rules policy.Rules `json:"rules"`
	V     int          `json:"v"`
}

// RulesLeaseTTL is the rules key's lease: a week, renewed by its node once
// a day, so that a node gone for good stops counting a week after it left.
const RulesLeaseTTL = 7 * 24 * time.Hour

// RulesOps keep node's rules key at its rules, on lease: written only when
// the value or the lease differs (an op for the publication's own
// transaction; a renewal of the lease changes no revision).
func RulesOps(ns, node, group string, rules policy.Rules, lease clientv3.LeaseID) []clientv3.Op {
	val, _ := json.Marshal(NodeRules{Group: group, Rules: rules, V: policy.ProtocolVersion})
	key := RulesKey(ns, node)
	return []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", string(val)),
		clientv3.Compare(clientv3.LeaseValue(key), "=", lease)},
		nil, []clientv3.Op{clientv3.OpPut(key, string(val), clientv3.WithLease(lease))})}
}

// rulesStamp says which rules keys a rule set list was read from: their
// number and the newest modification revision among them. Equal stamps
// mean equal keys (a key written moves the revision; one deleted lowers the
// count, or moves the revision if another was written too).
type rulesStamp struct {
	Count  int64 `json:"count"`
	Newest int64 `json:"newest"`
}

// RulesCacheFile is the rules cache's file in run_dir.
const RulesCacheFile = "rules-cache.json"

// RulesCache keeps the fleet's distinct rule sets between admissions, in
// memory and, with Path, in a file (the daemon's cycle child and the
// pipeline are short-lived processes: run_dir/rules-cache.json). A zero
// RulesCache is ready; a cache that cannot be read or written only costs a
// read of every rules key.
type RulesCache struct {
	Path string
	mu   sync.Mutex
	data rulesCacheData
}

type rulesCacheData struct {
	Stamp rulesStamp  `json:"stamp"`
	Sets  []NodeRules `json:"sets"`
}

// get returns the rule sets for stamp, if cached.
func (rc *RulesCache) get(s rulesStamp) ([]NodeRules, bool) {
	if rc == nil {
		return nil, false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.data.Stamp == s && s.Newest != 0 {
		return rc.data.Sets, true
	}
	if rc.Path == "" {
		return nil, false
	}
	b, err := os.ReadFile(rc.Path)
	if err != nil {
		return nil, false
	}
	var d rulesCacheData
	if json.Unmarshal(b, &d) != nil || d.Stamp != s || s.Newest == 0 {
		return nil, false
	}
	rc.data = d
	return d.Sets, true
}

func (rc *RulesCache) put(s rulesStamp, sets []NodeRules) {
	if rc == nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.data = rulesCacheData{Stamp: s, Sets: sets}
	if rc.Path != "" {
		b, _ := json.Marshal(rc.data)
		_ = atomicfile.WriteFile(rc.Path, b, 0o600)
	}
}

// rulesStampOps read the rules keys' stamp (two small ranges).
func rulesStampOps(ns string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(RulesDir(ns), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(RulesDir(ns), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1),
			clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)),
	}
}

// ruleSets are the distinct rule sets of the rules keys at rev: from the
// cache when the stamp matches, else read (and cached).
func (f Fleet) ruleSets(ctx context.Context, s rulesStamp, rev int64) ([]NodeRules, error) {
	if s.Count == 0 {
		return nil, nil
	}
	if sets, ok := f.RulesCache.get(s); ok {
		return sets, nil
	}
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	resp, err := f.Client.Get(rctx, RulesDir(f.NS), clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return nil, err
	}
	sets := distinctRules(resp.Kvs)
	f.RulesCache.put(s, sets)
	return sets, nil
}

// distinctRules are the distinct (group, rules) of the rules keys; a value
// that cannot be read is left out (the node's health record and its slot
// still carry its rules).
func distinctRules(kvs []*mvccpb.KeyValue) []NodeRules {
	seen := map[string]bool{}
	var out []NodeRules
	for _, kv := range kvs {
		var nr NodeRules
		if json.Unmarshal(kv.Value, &nr) != nil {
			continue
		}
		nr.V = 0
		b, _ := json.Marshal(nr)
		if seen[string(b)] {
			continue
		}
		seen[string(b)] = true
		out = append(out, nr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// isNested reports whether key, under the ungrouped line's prefix lock+"/",
// is a group's entry (lock/<group>/<lease>), not the line's own.
func isNested(lock, key string) bool {
	return strings.Contains(strings.TrimPrefix(key, lock+"/"), "/")
}
