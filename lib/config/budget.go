package config

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Budget is how many nodes a rule allows: a count (2), or a percentage of
// the nodes in the rule's scope ("10%"), rounded down and at least 1
// (docs/rollout.md, "Budgets as percentages"). The zero value is the count 0.
type Budget struct {
	// N is the count, when Percent is 0.
	N int
	// Percent, when set (1 to 100), makes the budget a percentage.
	Percent int
}

// Count is the budget of n nodes.
func Count(n int) Budget { return Budget{N: n} }

// IsZero reports the count 0 (for a rule that 0 turns off).
func (b Budget) IsZero() bool { return b.Percent == 0 && b.N == 0 }

// Of is the budget's number for a scope of nodes nodes: the count, or the
// percentage of nodes rounded down, at least 1.
func (b Budget) Of(nodes int) int {
	if b.Percent == 0 {
		return b.N
	}
	return max(1, nodes*b.Percent/100)
}

// String is the budget as written: "2" or "10%".
func (b Budget) String() string {
	if b.Percent > 0 {
		return strconv.Itoa(b.Percent) + "%"
	}
	return strconv.Itoa(b.N)
}

// ParseBudget reads "2", "10%" or " 10 % ".
func ParseBudget(s string) (Budget, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 100 {
			return Budget{}, fmt.Errorf("%q is not a percentage from 1%% to 100%%", s)
		}
		return Budget{Percent: n}, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil {
		return Budget{}, fmt.Errorf("%q is neither a whole number nor a percentage such as \"10%%\"", s)
	}
	return Budget{N: n}, nil
}

// UnmarshalYAML reads an integer or a string ("10%").
func (b *Budget) UnmarshalYAML(n *yaml.Node) error {
	wrongType := func() error {
		// A TypeError lets yaml.v3 go on, and validate-config list it with
		// the file's other problems.
		what := yamlTags[n.ShortTag()]
		if n.Kind == yaml.ScalarNode {
			what += fmt.Sprintf(" %q", n.Value)
		}
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: wrong type: %s where a whole number or a percentage such as \"10%%\" is expected", n.Line, what)}}
	}
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!str") {
		return wrongType()
	}
	if n.ShortTag() == "!!str" && !strings.HasSuffix(strings.TrimSpace(n.Value), "%") {
		return wrongType()
	}
	v, err := ParseBudget(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*b = v
	return nil
}

// MarshalYAML writes a count as an integer, a percentage as "10%".
func (b Budget) MarshalYAML() (any, error) {
	if b.Percent > 0 {
		return b.String(), nil
	}
	return b.N, nil
}

// MarshalJSON writes a count as a number, a percentage as "10%".
func (b Budget) MarshalJSON() ([]byte, error) {
	if b.Percent > 0 {
		return json.Marshal(b.String())
	}
	return json.Marshal(b.N)
}

// UnmarshalJSON reads a number or a string.
func (b *Budget) UnmarshalJSON(data []byte) error {
	var n int
	if err := json.Unmarshal(data, &n); err == nil {
		*b = Budget{N: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("budget: want a number or a percentage string, not %s", data)
	}
	v, err := ParseBudget(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}
