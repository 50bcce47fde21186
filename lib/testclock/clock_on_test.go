//go:build crdtestclock

package testclock

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestParseOffset(t *testing.T) {
	tests := []struct {
		name, in string
		want     time.Duration
		wantErr  bool
	}{
		{name: "unset", in: "", want: 0},
		{name: "hours ahead", in: "5h", want: 5 * time.Hour},
		{name: "behind", in: "-7h30m", want: -(7*time.Hour + 30*time.Minute)},
		{name: "zero", in: "0s", want: 0},
		{name: "no unit", in: "5", wantErr: true},
		{name: "words", in: "five hours", wantErr: true},
		{name: "spaces", in: " 5h", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOffset(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseOffset(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), EnvOffset) {
				t.Errorf("error %q does not name %s", err, EnvOffset)
			}
			if got != tt.want {
				t.Errorf("ParseOffset(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestOffsetFrom(t *testing.T) {
	tests := []struct {
		name, env  string
		want       time.Duration
		wantStderr string
	}{
		{name: "valid", env: "-2h", want: -2 * time.Hour},
		{name: "unset: silent", env: "", want: 0},
		{name: "invalid: real clock, one line", env: "tomorrow", want: 0,
			wantStderr: "testclock: CRD_TEST_CLOCK_OFFSET=\"tomorrow\" is not a Go duration (write e.g. 5h or -7h30m); using the real clock\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			getenv := func(k string) string {
				if k != EnvOffset {
					t.Errorf("read %s, want only %s", k, EnvOffset)
				}
				return tt.env
			}
			if got := offsetFrom(getenv, &stderr); got != tt.want {
				t.Errorf("offset = %s, want %s", got, tt.want)
			}
			if stderr.String() != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// helperEnv makes the test binary, started again, print what Now reads
// ahead of the real clock instead of running the tests.
const helperEnv = "TESTCLOCK_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		before := time.Now()
		got := Now()
		// Rounded: the two readings are microseconds apart.
		fmt.Printf("%s %s\n", got.Sub(before).Round(time.Second), Offset())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Now adds the offset of the environment, read once per process; the
// monotonic reading moves with the wall clock.
func TestNowSkewed(t *testing.T) {
	tests := []struct{ env, want string }{
		{env: "5h", want: "5h0m0s 5h0m0s"},
		{env: "-7h30m", want: "-7h30m0s -7h30m0s"},
		{env: "", want: "0s 0s"},
		{env: "bogus", want: "0s 0s"},
	}
	for _, tt := range tests {
		t.Run("offset="+tt.env, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), helperEnv+"=1", EnvOffset+"="+tt.env)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("helper: %v", err)
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("Now ahead of the real clock, offset: %q, want %q", got, tt.want)
			}
		})
	}
	a := Now()
	time.Sleep(10 * time.Millisecond)
	if d := Now().Sub(a); d < 10*time.Millisecond || d > time.Minute {
		t.Errorf("two readings 10ms apart differ by %s", d)
	}
	if !Enabled {
		t.Error("Enabled is false in a crdtestclock build")
	}
}
