package exitcode

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
)

func TestCodesAndNamesAreUnique(t *testing.T) {
	seenCode := map[Code]bool{}
	seenName := map[string]bool{}
	for _, c := range All() {
		if seenCode[c] {
			t.Errorf("code %d listed twice", c)
		}
		seenCode[c] = true
		n := c.Name()
		if seenName[n] {
			t.Errorf("name %q used twice", n)
		}
		seenName[n] = true
	}
	// Every code with a name is in All(): an exit status is 0-255.
	for c := Code(0); c < 256; c++ {
		if n := c.Name(); !strings.HasPrefix(n, "unknown_") && !seenCode[c] {
			t.Errorf("code %d is named %q but missing from All(): keep them in step", c, n)
		}
	}
}

func TestFrom(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain error is a bug", errors.New("boom"), 70},
		{"coded", New(LockBusy, errors.New("held")), 4},
		{"wrapped coded", fmt.Errorf("crd-lock: %w", Errorf(EtcdUnavailable, "dial %s", "x")), 7},
		{"outermost wins", Errorf(Config, "outer: %w", New(HealthBlocked, errors.New("inner"))), 2},
		{"help", flag.ErrHelp, 0},
		{"cancelled", fmt.Errorf("wait: %w", context.Canceled), 130},
		{"new nil", New(Config, nil), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := From(tt.err); got != tt.want {
				t.Errorf("From(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestUnknownName(t *testing.T) {
	if got := Code(42).Name(); got != "unknown_42" {
		t.Errorf("got %q", got)
	}
}

func TestPathCause(t *testing.T) {
	_, err := os.Stat("/nonexistent/crd")
	if got := PathCause(fmt.Errorf("wrapped: %w", err)); !errors.Is(got, fs.ErrNotExist) || got.Error() != "no such file or directory" {
		t.Errorf("PathCause = %v", got)
	}
	other := errors.New("not a path error")
	if PathCause(other) != other {
		t.Error("PathCause changed an error without a path")
	}
}
