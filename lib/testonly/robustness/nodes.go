package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/fleetlock"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// fleetClient is a FleetLock client (Zincati): it asks one of the servers
// for its reboot, reboots once granted, and tells one of them it is back.
type fleetClient struct {
	env  *env
	spec NodeSpec
	a    *Actor
	rng  *rand.Rand
	// asking is true while its pre-reboot is in flight (its re-sender
	// sends the same request then); done once it stopped asking.
	asking, done bool
}

// group is the FleetLock group the client sends ("default" is the
// ungrouped lock).
func (n *fleetClient) group() string {
	if n.spec.Group == "" {
		return fleetlock.DefaultGroup
	}
	return n.spec.Group
}

func (n *fleetClient) server() *fleetlock.Server {
	return n.env.replicas[n.rng.IntN(len(n.env.replicas))]
}

func (n *fleetClient) run(ctx context.Context) {
	ctx = n.a.Context(ctx)
	defer func() { n.done = true }()
	reboots := 0
	for range n.spec.Attempts {
		if reboots >= n.spec.Reboots {
			return
		}
		n.a.Yield("asks for its reboot")
		n.asking = true
		res, err := n.server().PreReboot(ctx, n.spec.Name, n.group())
		n.asking = false
		n.env.sched.trace.note(n.a, fmt.Sprintf("pre-reboot: %s %v", res, errText(err)))
		if err != nil {
			continue
		}
		if n.rng.Float64() < n.spec.Loss {
			n.env.world.doomKey(slot.Key(n.env.ns, n.spec.Name))
			n.env.sched.trace.note(n.a, "goes down and never comes back")
			return
		}
		if n.rng.Float64() < n.spec.Stay {
			// Granted, but it does not reboot now: it asks again later
			// (its slot, not renewed, may run out meanwhile).
			n.env.world.doomKey(slot.Key(n.env.ns, n.spec.Name))
			n.env.sched.trace.note(n.a, "does not reboot after all: asks again later")
			continue
		}
		for range 1 + n.rng.IntN(3) {
			n.a.Yield("is down")
		}
		res, err = n.server().SteadyState(ctx, n.spec.Name, n.group())
		n.env.sched.trace.note(n.a, fmt.Sprintf("steady-state: %s %v", res, errText(err)))
		if err == nil {
			reboots++
		}
	}
}

// resend sends the client's pre-reboot a second time, through another
// replica, while the first is in flight (a client that retries, two
// servers behind one name).
func (n *fleetClient) resend(ctx context.Context, a *Actor) {
	ctx = a.Context(ctx)
	for range 3 * n.spec.Attempts {
		a.Yield("may send again")
		if n.done {
			return
		}
		if !n.asking {
			continue
		}
		res, err := n.server().PreReboot(ctx, n.spec.Name, n.group())
		n.env.sched.trace.note(a, fmt.Sprintf("pre-reboot again: %s %v", res, errText(err)))
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// plainHold is `crd-lock hold -- COMMAND` without a reboot slot: a seat
// without the candidate mark, held while its command runs.
type plainHold struct {
	env  *env
	spec NodeSpec
	a    *Actor
	c    *clientv3.Client
	cfg  config.Config
	now  func() time.Time
}

func (n *plainHold) run(ctx context.Context) {
	ctx = n.a.Context(ctx)
	for range n.spec.Attempts {
		n.a.Yield("starts a plain hold")
		o := lock.FromConfig(n.cfg, "boot-"+n.spec.Name, n.spec.Machine)
		o.Purpose = "hold"
		o.Backoff = lock.Backoff{Min: time.Millisecond, Max: time.Millisecond, Rand: func() float64 { return 0 }}
		o.Now = n.now
		held, err := lock.Acquire(ctx, n.c, o)
		if err != nil {
			n.env.sched.trace.note(n.a, "no seat: "+err.Error())
			continue
		}
		n.a.Holding(held.Entry(), int64(held.LeaseID()))
		for range n.spec.Waits {
			n.a.Yield("its command runs")
		}
		_ = held.Release(ctx)
		n.a.Holding("", 0)
	}
}

// operator pauses and resumes the fleet, holds and releases nodes, and
// resumes a halted rollout (acknowledging its failures), as
// `clusterrebootd pause|resume|hold|release-hold` do.
type operator struct {
	env   *env
	a     *Actor
	c     *clientv3.Client
	rng   *rand.Rand
	fleet slot.Fleet
	times int
	// groupOf is each node's group: with failure_scope group, two in three
	// resumes end one group's halt (`resume --group`): the first halted
	// one, else the drawn node's.
	groupOf map[string]string
	// haltedGroups: before a resume of one group, look at the fleet (up to
	// haltLooks reads) until two groups are halted.
	haltedGroups bool
}

// haltLooks bounds the operator's wait for two halted groups.
const haltLooks = 150

func (o *operator) run(ctx context.Context) {
	ctx = o.a.Context(ctx)
	for range o.times {
		for range 1 + o.rng.IntN(24) {
			o.a.Yield("looks at the fleet")
		}
		var what string
		var err error
		node := o.env.world.Nodes[o.rng.IntN(len(o.env.world.Nodes))]
		switch x := o.rng.IntN(10); {
		case x < 6:
			var group *string
			if g, ok := o.groupOf[node]; ok && x < 4 && o.fleet.Rules.FailureScope == config.ScopeGroup {
				group = &g
				// The operator resumes a group it sees halted, if any.
				if halts := o.halts(ctx); len(halts) > 0 {
					group = &halts[0].Group
				}
			}
			what, err = resumeRollout(ctx, o.fleet, group, "robustness: the operator looked")
			what = "resume: " + what
		case x == 6:
			_, err = o.c.Put(ctx, slot.PauseKey(o.env.ns), `{"reason":"the operator pauses","by":"operator"}`)
			what = "pause"
		case x == 7:
			_, err = o.c.Put(ctx, slot.HoldKey(o.env.ns, node), `{"reason":"the operator holds it","by":"operator"}`)
			what = "hold " + node
		default:
			_, err = o.c.Delete(ctx, slot.HoldKey(o.env.ns, node))
			what = "release-hold " + node
		}
		if err != nil {
			what += ": " + err.Error()
		}
		o.env.sched.trace.note(o.a, what)
	}
}

// halts reads the halts; with haltedGroups it reads them again, up to
// haltLooks times, until two groups are halted.
func (o *operator) halts(ctx context.Context) []slot.Halt {
	var halts []slot.Halt
	for range haltLooks {
		resp, err := o.c.Get(ctx, slot.HaltsDir(o.env.ns), clientv3.WithPrefix())
		if err != nil {
			return nil
		}
		halts = halts[:0]
		groups := map[string]bool{}
		for _, kv := range resp.Kvs {
			h := slot.ParseHalt(kv.Key, kv.Value)
			halts = append(halts, h)
			groups[h.Group] = true
		}
		if !o.haltedGroups || len(groups) >= 2 {
			break
		}
	}
	return halts
}

func joinOr(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	return strings.Join(list, ", ")
}
