package crdlock

import (
	"strings"
	"testing"
	"time"
)

func TestKillGrace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		given   time.Duration
		set     bool
		want    time.Duration
		wantErr string
	}{
		{name: "default with the default TTL", ttl: 90 * time.Second, want: 10 * time.Second},
		{name: "default with a TTL of 30 s is a quarter", ttl: 30 * time.Second, want: 7500 * time.Millisecond},
		{name: "default with the shortest TTL", ttl: 5 * time.Second, want: 1250 * time.Millisecond},
		{name: "given below a third", ttl: 90 * time.Second, given: 29 * time.Second, set: true, want: 29 * time.Second},
		{name: "given zero kills at once", ttl: 5 * time.Second, given: 0, set: true, want: 0},
		{name: "given a third is refused", ttl: 30 * time.Second, given: 10 * time.Second, set: true, wantErr: "--kill-grace 10s is not below a third of the lock TTL 30s"},
		{name: "given above a third is refused", ttl: 6 * time.Second, given: 10 * time.Second, set: true, wantErr: "give less than 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := killGrace(tc.ttl, tc.given, tc.set)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("killGrace = %s, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("killGrace = %s, %v; want %s", got, err, tc.want)
			}
			if got >= tc.ttl/3 {
				t.Fatalf("grace %s is not below a third of the TTL %s", got, tc.ttl)
			}
		})
	}
}
