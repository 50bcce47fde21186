package robustness

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// The kinds of simulated node.
const (
	// KindDaemon is clusterrebootd's cycle: a candidate seat of its group's
	// line (purpose "reboot"), the admission, the pre-reboot hooks, the
	// slot renewed, Reboot.Start, the seat released, the reboot, and after
	// it Completion.Complete with a new boot id.
	KindDaemon = "daemon"
	// KindPipeline is `crd-lock hold --reboot-slot -- COMMAND`: the same
	// under a pipeline's seat; COMMAND reboots through crd-reboot's start
	// gate (Reboot.Start) or by other means (Reboot.MarkStarted).
	KindPipeline = "pipeline"
	// KindFleetLock is a FleetLock client (Zincati): pre-reboot through one
	// of the servers (lib/fleetlock, several replicas on the same etcd),
	// maybe through a second one at the same time, then steady-state
	// after its reboot.
	KindFleetLock = "fleetlock"
	// KindPlain is a plain `crd-lock hold` (a seat without the candidate
	// mark) running its command for a while: it counts against max_holders
	// for every candidate.
	KindPlain = "plain"
)

// NodeSpec is one simulated node and what it will do.
type NodeSpec struct {
	Kind  string
	Name  string
	Group string
	// Machine is its machine id; two specs with one name and two machine
	// ids are two machines with one node_name (a conflict).
	Machine string
	// Skew is how far its clock is off.
	Skew time.Duration
	// Attempts is how many times it asks (a cycle, a pipeline run, a
	// pre-reboot, a plain hold), Reboots how many reboots it wants, Waits
	// how many times it counts again under its seat while a rule says wait.
	Attempts, Reboots, Waits int
	// Loss is the chance that a reboot never comes back (the node is
	// lost: its slot is left to run out), Abort that a pre-reboot hook
	// fails (the slot is given back), Stay that the reboot does not happen
	// and the node stays up in the same boot (a daemon's or pipeline's
	// reboot command that started and failed: its slot is kept until it
	// runs out; a FleetLock client that does not reboot after its grant and
	// asks again later, without steady-state).
	Loss, Abort, Stay float64
	// Publish: it publishes a health record (state rebooting, on a long
	// lease) before its reboot, and a fresh one after it.
	Publish bool
	// Resend: a FleetLock client whose pre-reboot also arrives through a
	// second replica at the same time.
	Resend bool
	// Unindexed: its health records carry no index keys (a node of 0.1.0):
	// the admissions then read every record for the policies' summary.
	Unindexed bool
	// Wave is its rollout.wave (Scenario.Waves; a daemon's or pipeline's).
	Wave int
}

// Scenario is one run's fleet: its rules, its nodes, the operator and the
// faults.
type Scenario struct {
	// Seed drew the scenario and drives its schedule.
	Seed uint64
	// MaxHolders is max_holders (every group), MaxTotal
	// max_holders_total (0: none), MaxFailures the failure budget (0:
	// off), Scope failure_scope.
	MaxHolders, MaxTotal, MaxFailures int
	Scope                             string
	// HoldersPct, when not 0, is max_holders as a percentage (of the nodes
	// known in the group), TotalPct max_holders_total as one (of the nodes
	// known in the fleet). Every daemon and pipeline then publishes, an
	// idle record before its first cycle, so that there are nodes to know.
	HoldersPct, TotalPct int
	Nodes                []NodeSpec
	// Replicas is the number of FleetLock servers.
	Replicas int
	// Operator: an operator pauses, resumes (acknowledging the failures),
	// holds and releases nodes now and then.
	Operator bool
	// OperatorActions is how many things the operator does.
	OperatorActions int
	Faults          FaultRates
	// NoSkew runs every clock true (the same schedule must follow).
	NoSkew bool
	// Paced: every node runs with rollout.min_interval_sec (pacedSec: no
	// pacing mark runs out by time during a run; FaultEndPacing ends one).
	Paced bool
	// Rate is rollout.max_starts_per_hour (0: none); the start records'
	// hour-long leases end only by FaultEndPacing.
	Rate int
	// HaltedGroups: both groups of a failure_scope group fleet are made to
	// halt at once, and the operator's resumes of one group wait for it
	// (drawHaltedGroups).
	HaltedGroups bool
	// Waves: daemons and pipelines are of waves 0 to 2, and publish that
	// they need their reboot at the start of each cycle (drawWaves).
	Waves bool
	// WaveBake is rollout.wave_bake_sec (0: none; drawWaves): each
	// completion leaves a mark on a lease of its own that holds the later
	// waves back until it runs out. An hour: the marks end only by
	// FaultEndPacing, so that no timer decides anything.
	WaveBake int
	// Policy is the built-in cluster policies every node runs with (none
	// when zero). With a policy every publishing node publishes an idle
	// record before its first cycle, so that there are healthy nodes to
	// count.
	Policy config.Policies
}

// Seat and slot leases: long enough that no keepalive matters during a
// run; a lease "running out" is a fault's revocation.
const (
	seatTTLSec = 300
	slotTTLSec = 3600
	pacedSec   = 3600
)

// Generate draws a scenario from seed.
func Generate(seed uint64) Scenario {
	rng := rand.New(rand.NewPCG(seed, 0xf1ee7))
	sc := Scenario{Seed: seed, MaxHolders: 1 + rng.IntN(3), Scope: config.ScopeFleet, Replicas: 1 + rng.IntN(2)}
	groups := []string{""}
	if rng.IntN(3) == 0 {
		groups = append(groups, "rack2")
		if rng.IntN(2) == 0 {
			sc.MaxTotal = 1 + rng.IntN(3)
		}
		if rng.IntN(3) == 0 {
			sc.Scope = config.ScopeGroup
		}
	}
	switch rng.IntN(6) {
	case 0:
		sc.MaxFailures = 0
	case 1, 2:
		sc.MaxFailures = 2
	default:
		sc.MaxFailures = 1
	}
	n := 3 + rng.IntN(4)
	kinds := []string{KindDaemon, KindDaemon, KindPipeline, KindFleetLock}
	for i := range n {
		s := NodeSpec{Kind: kinds[rng.IntN(len(kinds))], Name: fmt.Sprintf("n%d", i+1), Group: groups[rng.IntN(len(groups))],
			Attempts: 3 + rng.IntN(4), Reboots: 1 + rng.IntN(2), Waits: 2 + rng.IntN(4),
			Loss: []float64{0, 0.1, 0.3}[rng.IntN(3)], Abort: []float64{0, 0.2}[rng.IntN(2)], Stay: []float64{0, 0, 0.2}[rng.IntN(3)],
			Publish: rng.IntN(2) == 0, Resend: rng.IntN(3) == 0,
			Skew: time.Duration(rng.IntN(21)-10) * time.Minute}
		s.Machine = "m-" + s.Name
		sc.Nodes = append(sc.Nodes, s)
	}
	for i := range rng.IntN(3) {
		sc.Nodes = append(sc.Nodes, NodeSpec{Kind: KindPlain, Name: fmt.Sprintf("p%d", i+1), Group: groups[rng.IntN(len(groups))],
			Machine: fmt.Sprintf("m-p%d", i+1), Attempts: 1 + rng.IntN(2), Waits: 1 + rng.IntN(4), Skew: time.Duration(rng.IntN(21)-10) * time.Minute})
	}
	if rng.IntN(4) == 0 {
		// A second machine under the name of a daemon or pipeline.
		for i := range sc.Nodes {
			if k := sc.Nodes[i].Kind; k == KindDaemon || k == KindPipeline {
				twin := sc.Nodes[i]
				twin.Machine += "-twin"
				twin.Skew = -twin.Skew
				sc.Nodes = append(sc.Nodes, twin)
				break
			}
		}
	}
	sc.Operator = rng.IntN(4) != 0
	sc.OperatorActions = 4 + rng.IntN(9)
	sc.Faults = FaultRates{ExpireAfterCount: 0.08, Expire: 0.01, Freeze: 0.01, Stall: 0.03, Pause: 0.004, Hold: 0.004}
	sc.drawPolicy(seed)
	sc.drawScope(seed)
	sc.drawPacing(seed)
	sc.drawPercent(seed)
	sc.drawHaltedGroups(seed)
	sc.drawWaves(seed)
	sc.drawRecordEnds(seed)
	return sc
}

// drawWaves puts the daemons and pipelines of one scenario in four in waves
// 0 to 2, from a generator of its own (the rest of a seed's scenario stays
// the same). Every one of them then publishes: an idle record before its
// first cycle, one that says it needs its reboot at the start of each cycle,
// rebooting before its reboot and idle after it, so that a later wave waits
// for the earlier ones' records (its busy keys, or every record where a node
// is unindexed) and slots. In one in two of them wave_bake_sec is an hour:
// each completion's mark then holds the later waves back until
// FaultEndPacing ends its lease (its bake time over; a mark that ran out by
// time would make a replay depend on the machine's speed). wave_timeout_sec
// stays the default (a day: no record outlives it during a run).
func (sc *Scenario) drawWaves(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x3a7e5))
	if rng.IntN(4) != 0 {
		return
	}
	sc.Waves = true
	for i, n := range sc.Nodes {
		if n.Kind == KindDaemon || n.Kind == KindPipeline {
			sc.Nodes[i].Publish, sc.Nodes[i].Wave = true, rng.IntN(3)
		}
	}
	if rng.IntN(2) == 0 {
		sc.WaveBake = 3600
		sc.Faults.EndPacing = endPacingRate
	}
}

// drawRecordEnds lets the health records of nodes gone for ever run out
// (FaultEndRecord) in one in two scenarios where some node that publishes
// may be lost, from a generator of its own (the rest of a seed's scenario
// stays the same). With a percentage the group and the fleet then shrink:
// a take is judged against the nodes its count knew (model.holders).
func (sc *Scenario) drawRecordEnds(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x4ec0d))
	lossy := false
	for _, n := range sc.Nodes {
		lossy = lossy || (n.Publish && n.Loss > 0 && (n.Kind == KindDaemon || n.Kind == KindPipeline))
	}
	if !lossy || rng.IntN(2) != 0 {
		return
	}
	sc.Faults.EndRecord = 0.1
}

// drawHaltedGroups makes both groups of one in two failure_scope group
// fleets halt at once, from a generator of its own (the rest of a seed's
// scenario stays the same): in each group one node that reboots is lost
// one reboot in two and reboots twice, and the operator acts, so that a
// resume of one group (`resume --group`) meets the other group's failures,
// which must keep counting (InvAckScope); the operator's resumes of one
// group look at the fleet until two groups are halted (a bounded wait).
func (sc *Scenario) drawHaltedGroups(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x4a17ed))
	if sc.Scope != config.ScopeGroup || sc.MaxFailures == 0 || rng.IntN(2) != 0 {
		return
	}
	lossy := map[string]bool{}
	for i, n := range sc.Nodes {
		if n.Kind == KindPlain || lossy[n.Group] || n.Machine != "m-"+n.Name {
			continue
		}
		lossy[n.Group] = true
		sc.Nodes[i].Loss, sc.Nodes[i].Reboots = 0.5, 2
	}
	sc.Operator, sc.HaltedGroups = true, true
}

// drawPercent makes max_holders a percentage in one scenario of four, and
// with two groups max_holders_total one in half of those, from a generator
// of its own (the rest of a seed's scenario stays the same).
func (sc *Scenario) drawPercent(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x9e4c))
	if rng.IntN(4) != 0 {
		return
	}
	sc.HoldersPct = []int{34, 50, 67, 100}[rng.IntN(4)]
	groups := false
	for i, n := range sc.Nodes {
		groups = groups || n.Group != ""
		// Every daemon and pipeline publishes: the nodes known are more
		// than the slots, and a percentage resolves to more than 1.
		sc.Nodes[i].Publish = n.Publish || n.Kind == KindDaemon || n.Kind == KindPipeline
	}
	if groups && rng.IntN(2) == 0 {
		sc.TotalPct = []int{50, 75}[rng.IntN(2)]
	}
}

// percent reports whether a budget is a percentage.
func (sc Scenario) percent() bool { return sc.HoldersPct > 0 || sc.TotalPct > 0 }

// drawPacing turns min_interval_sec on in one scenario of four, and
// max_starts_per_hour (1 or 2) in one of four, from a generator of its own
// (the rest of a seed's scenario stays the same), with the fault that ends
// a pacing mark or a start record (its time over).
func (sc *Scenario) drawPacing(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xbace5))
	sc.Paced = rng.IntN(4) == 0
	if rng.IntN(4) == 0 {
		sc.Rate = 1 + rng.IntN(2)
	}
	if sc.Paced || sc.Rate > 0 {
		sc.Faults.EndPacing = endPacingRate
	}
}

// endPacingRate is FaultEndPacing's chance at each step, where it is drawn.
const endPacingRate = 0.03

// markDirs are the records FaultEndPacing may end.
func (sc Scenario) markDirs(ns string) []string {
	var out []string
	if sc.WaveBake > 0 {
		out = append(out, slot.WaveDoneDir(ns))
	}
	if sc.Paced {
		out = append(out, slot.PacedDir(ns))
	}
	if sc.Rate > 0 {
		out = append(out, slot.StartsDir(ns))
	}
	return out
}

// drawScope makes two of three fleets of two groups run failure_scope
// group (one of three did before resumes of one group were modelled), from
// a generator of its own: the rest of a seed's scenario stays the same.
func (sc *Scenario) drawScope(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5c09e))
	groups := false
	for _, n := range sc.Nodes {
		groups = groups || n.Group != ""
	}
	if groups && sc.Scope != config.ScopeGroup && rng.IntN(2) == 0 {
		sc.Scope = config.ScopeGroup
	}
}

// drawPolicy draws the scenario's built-in policies, from a generator of
// their own: the rest of a seed's scenario stays what it was before the
// policies were modelled.
func (sc *Scenario) drawPolicy(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x9011c7))
	if rng.IntN(3) != 0 {
		return
	}
	switch rng.IntN(3) {
	case 0:
		sc.Policy.MinHealthyAbsolute = 1 + rng.IntN(2)
	case 1:
		sc.Policy.MinHealthyFraction = []float64{0.5, 0.67}[rng.IntN(2)]
	default:
		sc.Policy.MinHealthyAbsolute = 1
		sc.Policy.MinHealthyFraction = 0.5
	}
	var names []string
	for i := range sc.Nodes {
		if k := sc.Nodes[i].Kind; k == KindDaemon || k == KindPipeline || k == KindFleetLock {
			names = append(names, sc.Nodes[i].Name)
		}
		sc.Nodes[i].Unindexed = sc.Nodes[i].Publish && rng.IntN(4) == 0
	}
	if len(names) >= 2 && rng.IntN(2) == 0 {
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		sc.Policy.ForbidIfOnlyFallbackLeft, sc.Policy.FallbackNodes = true, names[:2]
	}
}

// String describes the scenario in one paragraph, for a failing seed's report.
func (sc Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "max_holders %s, max_holders_total %s, max_failures %d (scope %s), %d FleetLock replica(s), operator %v",
		sc.holdersBudget(), sc.totalBudget(), sc.MaxFailures, sc.Scope, sc.Replicas, sc.Operator)
	if sc.Paced {
		b.WriteString(", min_interval_sec (marks end by a fault)")
	}
	if sc.Rate > 0 {
		fmt.Fprintf(&b, ", max_starts_per_hour %d (starts end by a fault)", sc.Rate)
	}
	if sc.HaltedGroups {
		b.WriteString(", both groups made to halt at once")
	}
	if sc.Waves {
		b.WriteString(", waves")
		if sc.WaveBake > 0 {
			fmt.Fprintf(&b, " (wave_bake_sec %d, its marks end by a fault)", sc.WaveBake)
		}
	}
	if sc.Faults.EndRecord > 0 {
		b.WriteString(", the records of nodes gone for ever end by a fault")
	}
	if p := sc.Policy; policy.Active(p) {
		fmt.Fprintf(&b, ", min_healthy_absolute %d, min_healthy_fraction %.2f, fallback_nodes %v", p.MinHealthyAbsolute, p.MinHealthyFraction, p.FallbackNodes)
	}
	b.WriteString("; nodes:")
	for _, n := range sc.Nodes {
		g := n.Group
		if g == "" {
			g = "-"
		}
		fmt.Fprintf(&b, " %s(%s, group %s, machine %s, skew %s, loss %.1f", n.Name, n.Kind, g, n.Machine, n.Skew, n.Loss)
		if sc.Waves && (n.Kind == KindDaemon || n.Kind == KindPipeline) {
			fmt.Fprintf(&b, ", wave %d", n.Wave)
		}
		if n.Publish {
			b.WriteString(", publishes")
			if n.Unindexed {
				b.WriteString(" without index")
			}
		}
		b.WriteString(")")
	}
	return b.String()
}

// policyRules are the scenario's policies as the checker reads them.
func (sc Scenario) policyRules() PolicyRules {
	p := PolicyRules{MinHealthy: sc.Policy.MinHealthyAbsolute, MinFraction: sc.Policy.MinHealthyFraction}
	if sc.Policy.ForbidIfOnlyFallbackLeft {
		p.Fallbacks = sc.Policy.FallbackNodes
	}
	return p
}

// config is the configuration node spec runs with in namespace ns.
func (sc Scenario) config(ns string, n NodeSpec) config.Config {
	cfg := config.Default()
	cfg.LockKey, cfg.NodeName, cfg.Group = ns+"lock", n.Name, n.Group
	cfg.MaxHolders = sc.holdersBudget()
	if sc.MaxTotal > 0 || sc.TotalPct > 0 {
		cfg.MaxHoldersTotal = sc.totalBudget()
	}
	cfg.Rollout.MaxFailures = config.Count(sc.MaxFailures)
	cfg.Rollout.FailureScope = sc.Scope
	if sc.Paced {
		cfg.Rollout.MinIntervalSec = pacedSec
	}
	cfg.Rollout.MaxStartsPerHour = sc.Rate
	cfg.ClusterPolicies = sc.Policy
	cfg.Rollout.Wave, cfg.Rollout.WaveBakeSec = n.Wave, sc.WaveBake
	cfg.LockTTLSec, cfg.RebootSlotTTLSec, cfg.EtcdDialTimeoutSec = seatTTLSec, slotTTLSec, 10
	cfg.BackoffMinSec, cfg.BackoffMaxSec = 1, 1
	return cfg
}

// holdersBudget is max_holders as configured.
func (sc Scenario) holdersBudget() config.Budget {
	if sc.HoldersPct > 0 {
		return config.Budget{Percent: sc.HoldersPct}
	}
	return config.Count(sc.MaxHolders)
}

// totalBudget is max_holders_total as configured.
func (sc Scenario) totalBudget() config.Budget {
	if sc.TotalPct > 0 {
		return config.Budget{Percent: sc.TotalPct}
	}
	return config.Count(sc.MaxTotal)
}

// skew is n's clock offset (none with NoSkew).
func (sc Scenario) skew(n NodeSpec) func() time.Time {
	d := n.Skew
	if sc.NoSkew {
		d = 0
	}
	return func() time.Time { return time.Now().Add(d) }
}
