package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// interval is when one node was "rebooting": from its reboot command's start
// until just before its slot was freed.
type interval struct {
	who        string
	start, end float64
}

// maxOverlap is the largest number of intervals open at once (touching is
// not overlapping).
func maxOverlap(iv []interval) int {
	type ev struct {
		at    float64
		delta int
	}
	var evs []ev
	for _, i := range iv {
		evs = append(evs, ev{i.start, +1}, ev{i.end, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta
	})
	open, most := 0, 0
	for _, e := range evs {
		open += e.delta
		most = max(most, open)
	}
	return most
}

func TestMaxOverlap(t *testing.T) {
	for _, tc := range []struct {
		name string
		iv   []interval
		want int
	}{
		{"disjoint", []interval{{"a", 0, 1}, {"b", 2, 3}}, 1},
		{"touching", []interval{{"a", 0, 1}, {"b", 1, 2}}, 1},
		{"three overlap", []interval{{"a", 0, 5}, {"b", 1, 4}, {"c", 2, 3}}, 3},
		{"chain of two", []interval{{"a", 0, 2}, {"b", 1, 3}, {"c", 2.5, 4}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := maxOverlap(tc.iv); got != tc.want {
				t.Errorf("maxOverlap = %d, want %d", got, tc.want)
			}
		})
	}
}

// rollout runs each node through rounds reboots at once: a cycle, whose
// reboot command records "start NODE GROUP T" in a shared ledger, then a
// "boot" of 150 ms, "end NODE GROUP T", a new boot id and complete (what
// the daemon does after a reboot). It returns the reboot intervals, each
// labelled with its node's group.
func rollout(t *testing.T, nodes []*node, rounds int) (all []interval, group map[string]string, ledgerText string) {
	t.Helper()
	ledger := filepath.Join(t.TempDir(), "ledger")
	group = map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan string, 2*len(nodes))
	for _, n := range nodes {
		g, _ := n.cfg["group"].(string)
		group[n.name] = g
		n.boot = n.name + "-boot-0"
		script(t, filepath.Join(n.dir, "reboot.sh"), `echo "start $1 $(date +%s.%N)" >> `+ledger)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				o := n.run("cycle", "--attempt", strconv.Itoa(round+1))
				if o.code != exitcode.OK {
					errs <- fmt.Sprintf("%s round %d: cycle = %d %s", n.name, round, o.code, o.stdout)
					return
				}
				time.Sleep(150 * time.Millisecond) // the reboot
				mu.Lock()
				if f, err := os.OpenFile(ledger, os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
					fmt.Fprintf(f, "end %s %.9f\n", n.name, float64(time.Now().UnixNano())/1e9)
					f.Close()
				}
				mu.Unlock()
				n.boot = fmt.Sprintf("%s-boot-%d", n.name, round+1) // back from the reboot
				if o := n.run("complete"); o.code != exitcode.OK || o.json["freed"] != true {
					errs <- fmt.Sprintf("%s round %d: complete = %d %s", n.name, round, o.code, o.stdout)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	b, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		at, _ := strconv.ParseFloat(f[2], 64)
		if f[0] == "start" {
			open[f[1]] = at
		} else {
			all = append(all, interval{f[1], open[f[1]], at})
		}
	}
	if len(all) != rounds*len(nodes) {
		t.Fatalf("ledger has %d complete intervals, want %d:\n%s", len(all), rounds*len(nodes), b)
	}
	return all, group, string(b)
}

// TestMaxHoldersTwoOfThree runs three nodes that each reboot twice with
// max_holders 2. Never may three overlap.
func TestMaxHoldersTwoOfThree(t *testing.T) {
	ns := nsName(t)
	var nodes []*node
	for i := range 3 {
		n := newNode(t, embedded.Endpoint, ns, fmt.Sprintf("node-%d", i))
		n.cfg["max_holders"] = 2
		nodes = append(nodes, n)
	}
	iv, _, ledger := rollout(t, nodes, 2)
	if most := maxOverlap(iv); most > 2 {
		t.Errorf("%d nodes were rebooting at once with max_holders 2:\n%s", most, ledger)
	}
}

// TestTwoLimitsAtOnce: one per rack (max_holders 1 per group) and two
// fleet-wide (max_holders_total 2), six nodes in three racks, each rebooting
// twice at once. Neither limit is ever exceeded.
func TestTwoLimitsAtOnce(t *testing.T) {
	ns := nsName(t)
	var nodes []*node
	for i := range 6 {
		n := newNode(t, embedded.Endpoint, ns, fmt.Sprintf("node-%d", i))
		n.cfg["group"] = fmt.Sprintf("rack%d", i%3)
		n.cfg["max_holders"] = 1
		n.cfg["max_holders_total"] = 2
		nodes = append(nodes, n)
	}
	all, group, ledger := rollout(t, nodes, 2)
	if most := maxOverlap(all); most > 2 {
		t.Errorf("%d nodes were rebooting at once with max_holders_total 2:\n%s", most, ledger)
	}
	perRack := map[string][]interval{}
	for _, iv := range all {
		perRack[group[iv.who]] = append(perRack[group[iv.who]], iv)
	}
	for rack, iv := range perRack {
		if most := maxOverlap(iv); most > 1 {
			t.Errorf("%d nodes of %s were rebooting at once with max_holders 1:\n%s", most, rack, ledger)
		}
	}
}
