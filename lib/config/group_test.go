package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidGroup(t *testing.T) {
	for _, tc := range []struct {
		group string
		want  bool
	}{{"rack-1.a_b", true}, {"", true}, {".a", true}, {"a/b", false}, {"a b", false}, {strings.Repeat("g", 63), true}, {strings.Repeat("g", 64), false}, {string(make([]byte, 64)), false}} {
		t.Run(fmt.Sprintf("%q", tc.group), func(t *testing.T) {
			if got := ValidGroup(tc.group); got != tc.want {
				t.Errorf("ValidGroup(%q) = %v, want %v", tc.group, got, tc.want)
			}
		})
	}
}
