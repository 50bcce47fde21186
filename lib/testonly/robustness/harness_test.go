package robustness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// A lock's line is part of the schedule: with max_holders 1, plain holds
// queue behind each other (lib/lock's watch, which no request of the
// waiter ends), each is woken when the one ahead leaves, and the run ends.
func TestLineWaitIsScheduled(t *testing.T) {
	sc := Scenario{Seed: 1, MaxHolders: 1, Scope: config.ScopeFleet}
	for i := 1; i <= 3; i++ {
		sc.Nodes = append(sc.Nodes, NodeSpec{Kind: KindPlain, Name: fmt.Sprintf("p%d", i), Machine: fmt.Sprintf("m-p%d", i), Attempts: 2, Waits: 6})
	}
	rep := runSeed(t, sc, "a")
	judge(t, rep, true)
	for _, want := range []string{"waits in line", "wakes: an entry it waited on is gone"} {
		if !strings.Contains(rep.Trace.String(), want) {
			t.Errorf("no %q in the schedule: the line's wait is not modelled\n%s", want, rep.Trace)
		}
	}
}

// A node lost twice, with a resume between: its second loss halts the
// rollout again. At 0b9ae7d it did not (KnownReusedName): the second take
// overwrote the node's in-flight record in place, which kept the create
// revision of the first; the second loss was named as the first was
// (<node>/<that revision>), and the resume's acknowledgement of the first
// covered it. Found by this suite (docs/testing.md, "Robustness"); losses are
// named by their slot's lease since.
func TestSecondLossAfterAResumeHalts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := newClient(endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns := "/robustness/" + t.Name() + "/"
	first, err := c.Get(ctx, ns+"~start")
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenario{MaxHolders: 2, MaxFailures: 1, Scope: config.ScopeFleet}
	fleet := func(node string) slot.Fleet {
		return slot.FromConfig(c, sc.config(ns, NodeSpec{Name: node}), "boot-"+node, "m-"+node, slot.ViaDaemon)
	}
	admit := func(node string) (*slot.Reboot, error) {
		a := slot.Admission{Fleet: fleet(node)}
		out, err := a.Admit(ctx)
		return out.Reboot, err
	}
	// a's reboot command fails and it stays up; its slot runs out.
	r, err := admit("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, r.Lease); err != nil {
		t.Fatal(err)
	}
	if _, err := resumeRollout(ctx, fleet("operator"), nil, "a looked at"); err != nil {
		t.Fatal(err)
	}
	// The same again, after the resume.
	if r, err = admit("a"); err != nil {
		t.Fatalf("a after the resume: %v", err)
	}
	if _, err := c.Revoke(ctx, r.Lease); err != nil {
		t.Fatal(err)
	}
	rb, err := admit("b")
	var ref *slotinfo.Refusal
	if errors.As(err, &ref) && ref.Rule == slot.RuleHalted {
		return
	}
	if _, err := c.Put(ctx, ns+"~end", ""); err != nil {
		t.Fatal(err)
	}
	events, herr := ReadHistory(ctx, c, ns, first.Header.Revision+1, ns+"~end")
	if herr != nil {
		t.Fatal(herr)
	}
	vs, _ := Check(Rules{NS: ns, Lock: ns + "lock", MaxHolders: 2, MaxFailures: 1}, events, nil, nil)
	var found []string
	for _, v := range vs {
		found = append(found, v.String())
	}
	t.Errorf("b after a's second loss (not acknowledged: it came after the resume): admitted %v, err %v; want refused, halted. The checker:\n%s",
		rb != nil, err, strings.Join(found, "\n"))
}
