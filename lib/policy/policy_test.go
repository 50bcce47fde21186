package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

var now = time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)

func view(up []string, rebooting ...string) View {
	v := View{ReadAt: now}
	for _, n := range up {
		v.Nodes = append(v.Nodes, NodeRecord{Node: n, State: StateIdle})
	}
	for _, n := range rebooting {
		v.Rebooting = append(v.Rebooting, Slot{Node: n})
		v.Nodes = append(v.Nodes, NodeRecord{Node: n, State: StateRebooting})
	}
	return v
}

func TestEvaluate(t *testing.T) {
	five := []string{"n1", "n2", "n3", "n4", "n5"}
	tests := []struct {
		name     string
		v        View
		self     string
		p        config.Policies
		allowed  bool
		rule     string
		size     int
		healthy  int
		contains string
	}{
		{"no policy", View{}, "n1", config.Policies{}, true, "", 1, 0, "no cluster policy"},
		{"policy but no view", View{}, "n1", config.Policies{MinHealthyAbsolute: 1}, false, RuleClusterView, 1, 0, "no cluster view"},
		{"absolute ok", view(five), "n1", config.Policies{MinHealthyAbsolute: 3}, true, "", 5, 4, "4 of 5"},
		{"absolute exactly", view(five), "n1", config.Policies{MinHealthyAbsolute: 4}, true, "", 5, 4, ""},
		{"absolute broken", view(five), "n1", config.Policies{MinHealthyAbsolute: 5}, false, RuleAbsolute, 5, 4, "min_healthy_absolute is 5"},
		{"another node rebooting counts as down", view([]string{"n1", "n2", "n3"}, "n4"), "n1", config.Policies{MinHealthyAbsolute: 3}, false, RuleAbsolute, 4, 2, "2 of 4"},
		{"self not yet published still counts", view([]string{"n2", "n3"}), "n1", config.Policies{MinHealthyAbsolute: 2}, true, "", 3, 2, ""},
		{"fraction ok", view(five), "n1", config.Policies{MinHealthyFraction: 0.6}, true, "", 5, 4, ""},
		{"fraction boundary 0.8 of 5 needs 4", view(five), "n1", config.Policies{MinHealthyFraction: 0.8}, true, "", 5, 4, ""},
		{"fraction broken", view(five), "n1", config.Policies{MinHealthyFraction: 0.81}, false, RuleFraction, 5, 4, "needs 5"},
		{"fraction with one down", view([]string{"n1", "n2", "n3"}, "n4", "n5"), "n1", config.Policies{MinHealthyFraction: 0.6}, false, RuleFraction, 5, 2, ""},
		{"only fallback left", view([]string{"lb-1", "app-1"}, "lb-2"), "lb-1", config.Policies{ForbidIfOnlyFallbackLeft: true, FallbackNodes: []string{"lb-1", "lb-2"}}, false, RuleOnlyFallback, 3, 1, "lb-1 is the only healthy fallback"},
		{"fallback with a peer up", view([]string{"lb-1", "lb-2"}), "lb-1", config.Policies{ForbidIfOnlyFallbackLeft: true, FallbackNodes: []string{"lb-1", "lb-2"}}, true, "", 2, 1, ""},
		{"fallback peer never published", view([]string{"lb-1"}), "lb-1", config.Policies{ForbidIfOnlyFallbackLeft: true, FallbackNodes: []string{"lb-1", "lb-2"}}, false, RuleOnlyFallback, 1, 0, ""},
		{"non-fallback not blocked by fallback rule", view([]string{"app-1"}, "lb-2"), "app-1", config.Policies{ForbidIfOnlyFallbackLeft: true, FallbackNodes: []string{"lb-1", "lb-2"}}, true, "", 2, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(tt.v, tt.self, tt.p)
			if d.Allowed != tt.allowed || d.Rule != tt.rule {
				t.Fatalf("got allowed=%v rule=%q (%s), want allowed=%v rule=%q", d.Allowed, d.Rule, d.Reason, tt.allowed, tt.rule)
			}
			if d.ClusterSize != tt.size || d.HealthyAfter != tt.healthy {
				t.Errorf("size=%d healthy_after=%d, want %d %d", d.ClusterSize, d.HealthyAfter, tt.size, tt.healthy)
			}
			if !strings.Contains(d.Reason, tt.contains) {
				t.Errorf("reason %q does not contain %q", d.Reason, tt.contains)
			}
		})
	}
}

func TestMembersAndHealthy(t *testing.T) {
	v := view([]string{"b", "a"}, "c")
	if got := strings.Join(v.Members("z"), ","); got != "a,b,c,z" {
		t.Errorf("Members = %s", got)
	}
	if v.Healthy("c") || !v.Healthy("a") || v.Healthy("z") {
		t.Error("Healthy")
	}
	v.Rebooting = append(v.Rebooting, Slot{Node: "a"})
	if v.Healthy("a") {
		t.Error("a node with a slot is not healthy, whatever its record says")
	}
}
