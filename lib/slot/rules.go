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
// configurations do, not when nodes publish or reboot. Every write of a
// rules key also writes one key, <ns>index/rules-changed, in the same
// transaction: an admitting process keeps the distinct rule sets it read
// (RulesCache) and reads them again only when that key moved, so that an
// admission reads one key, not a range of the fleet's size. A rules key
// that goes (its lease ends a week after its node left, or an operator
// deletes it) does not move it: the cache keeps that node's rules, on the
// safe side, for at most RulesCacheMaxAge more (docs/runbooks.md).

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

// RulesChangedKey is written with every rules key: its modification
// revision is the newest rules key's (or newer).
func RulesChangedKey(ns string) string { return IndexDir(ns) + "rules-changed" }

// RulesOps keep node's rules key at its rules, on lease: written, with
// RulesChangedKey, only when the value or the lease differs or
// RulesChangedKey is missing (an op for the publication's own transaction;
// a renewal of the lease changes no revision).
func RulesOps(ns, node, group string, rules policy.Rules, lease clientv3.LeaseID) []clientv3.Op {
	val := RulesValue(group, rules)
	key, changed := RulesKey(ns, node), RulesChangedKey(ns)
	return []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", string(val)),
		clientv3.Compare(clientv3.LeaseValue(key), "=", lease),
		clientv3.Compare(clientv3.CreateRevision(changed), ">", 0)},
		nil, []clientv3.Op{clientv3.OpPut(key, string(val), clientv3.WithLease(lease)), clientv3.OpPut(changed, node)})}
}

// RulesValue is a rules key's value for a node of group with rules.
func RulesValue(group string, rules policy.Rules) string {
	b, _ := json.Marshal(NodeRules{Group: group, Rules: rules, V: policy.ProtocolVersion})
	return string(b)
}

// rulesStamp says which rules keys a rule set list was read from:
// RulesChangedKey's modification revision (0: the key is missing, and
// nothing can be cached) and when they were read, by this process's clock
// (it only decides when to read again).
type rulesStamp struct {
	Changed int64     `json:"changed"`
	ReadAt  time.Time `json:"read_at"`
}

// RulesCacheMaxAge is how long cached rule sets are used while
// RulesChangedKey stays: they are read again at least this often, so that
// the rules of a node whose rules key went stop counting.
const RulesCacheMaxAge = 24 * time.Hour

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

// get returns the rule sets for RulesChangedKey's revision changed, if
// cached and younger than RulesCacheMaxAge at now.
func (rc *RulesCache) get(changed int64, now time.Time) ([]NodeRules, bool) {
	if rc == nil || changed == 0 {
		return nil, false
	}
	fresh := func(d rulesCacheData) bool {
		age := now.Sub(d.Stamp.ReadAt)
		return d.Stamp.Changed == changed && age >= 0 && age < RulesCacheMaxAge
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if fresh(rc.data) {
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
	if json.Unmarshal(b, &d) != nil || !fresh(d) {
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

// rulesChangedOp reads RulesChangedKey.
func rulesChangedOp(ns string) clientv3.Op { return clientv3.OpGet(RulesChangedKey(ns)) }

// ruleSets are the distinct rule sets of the rules keys at rev, given
// RulesChangedKey's revision there (0: missing): from the cache when it
// holds them, else read (and cached).
func (f Fleet) ruleSets(ctx context.Context, changed, rev int64) ([]NodeRules, error) {
	now := f.now()
	if sets, ok := f.RulesCache.get(changed, now); ok {
		return sets, nil
	}
	kvs, err := f.get(ctx, rev, RulesDir(f.NS), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	sets := distinctRules(kvs)
	if changed != 0 {
		f.RulesCache.put(rulesStamp{Changed: changed, ReadAt: now}, sets)
	}
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
