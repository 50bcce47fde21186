package memtrim

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
)

const exe = "/usr/bin/clusterrebootd"

const sampleSmaps = `00400000-005c2000 r-xp 00000000 08:01 1234                               /usr/bin/clusterrebootd
Size:               1800 kB
Rss:                1740 kB
Anonymous:             0 kB
005c2000-00780000 r--p 001c2000 08:01 1234                               /usr/bin/clusterrebootd
Size:               1912 kB
Rss:                1860 kB
Anonymous:             0 kB
00780000-007a0000 rw-p 00380000 08:01 1234                               /usr/bin/clusterrebootd
Rss:                  64 kB
Anonymous:            12 kB
007a0000-007c0000 rw-p 00000000 00:00 0
Rss:                 128 kB
Anonymous:           128 kB
c000000000-c000400000 rw-p 00000000 00:00 0
Rss:                 900 kB
Anonymous:           900 kB
7f0000000000-7f0000001000 r--p 00000000 08:01 99                         /usr/lib/other lib.so
Rss:                   4 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
`

type call struct{ start, length uintptr }

func TestTrim(t *testing.T) {
	tests := []struct {
		name      string
		smaps     string
		exe       string
		adviseErr error
		want      Result
		wantCalls []call
		wantErr   bool
	}{
		{
			name: "text and rodata of the executable only", smaps: sampleSmaps, exe: exe,
			want:      Result{Mappings: 2, ResidentBytes: (1740 + 1860) << 10},
			wantCalls: []call{{0x400000, 0x1c2000}, {0x5c2000, 0x1be000}},
		},
		{
			name: "a mapping with copy-on-write pages is skipped",
			smaps: strings.Replace(sampleSmaps, "Rss:                1860 kB\nAnonymous:             0 kB",
				"Rss:                1860 kB\nAnonymous:             8 kB", 1),
			exe:       exe,
			want:      Result{Mappings: 1, ResidentBytes: 1740 << 10, Skipped: 1},
			wantCalls: []call{{0x400000, 0x1c2000}},
		},
		{
			name: "a path with spaces matches exactly", smaps: sampleSmaps, exe: "/usr/lib/other lib.so",
			want:      Result{Mappings: 1, ResidentBytes: 4 << 10},
			wantCalls: []call{{0x7f0000000000, 0x1000}},
		},
		{
			name: "another executable is left alone", smaps: sampleSmaps, exe: "/usr/bin/other",
			want: Result{},
		},
		{
			name: "a prefix of the path does not match", smaps: sampleSmaps, exe: "/usr/bin/clusterreboot",
			want: Result{},
		},
		{
			name: "madvise failing is reported", smaps: sampleSmaps, exe: exe, adviseErr: errors.New("EINVAL"),
			wantCalls: []call{{0x400000, 0x1c2000}}, wantErr: true,
		},
		{
			name: "garbage lines are ignored", smaps: "not a header\nRss: 5 kB\nzz-yy r-xp 0 0 0 " + exe + "\n" +
				"1000-0000 r-xp 0 0 0 " + exe + "\n1000-2000 rx 0 0 0 " + exe + "\n1000-2000 r-xp 0\n",
			exe: exe, want: Result{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []call
			got, err := trim(strings.NewReader(tt.smaps), tt.exe, func(start, length uintptr) error {
				calls = append(calls, call{start, length})
				return tt.adviseErr
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if len(calls) != len(tt.wantCalls) {
				t.Fatalf("madvise calls = %x, want %x", calls, tt.wantCalls)
			}
			for i := range calls {
				if calls[i] != tt.wantCalls[i] {
					t.Errorf("call %d = %x, want %x", i, calls[i], tt.wantCalls[i])
				}
			}
		})
	}
}

func TestParseKB(t *testing.T) {
	for in, want := range map[string]uint64{" 12 kB": 12 << 10, "0 kB": 0, "x kB": 0, "": 0} {
		if got := parseKB(in); got != want {
			t.Errorf("parseKB(%q) = %d, want %d", in, got, want)
		}
	}
}

// exeRSS is the resident size of this test binary's read-only mappings.
func exeRSS(t *testing.T) uint64 {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	regions, err := parseSmaps(f)
	if err != nil {
		t.Fatal(err)
	}
	var rss uint64
	for _, r := range regions {
		if r.readOnlyOf(exe) {
			rss += r.rss
		}
	}
	return rss
}

// TestTrimThisProcess trims the test binary itself: its read-only mappings
// shrink, and the program keeps running (the pages fault back in).
func TestTrimThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	before := exeRSS(t)
	res, err := Trim()
	if err != nil {
		t.Fatalf("Trim: %v", err)
	}
	after := exeRSS(t)
	if res.Mappings < 1 {
		t.Fatalf("Trim advised no mapping: %+v", res)
	}
	if after >= before {
		t.Errorf("resident read-only pages of the test binary: before %d B, after %d B; want fewer after", before, after)
	}
	t.Logf("before %d KiB, after %d KiB, %+v", before>>10, after>>10, res)
	// Code and read-only data that was dropped still works.
	if s := strings.Repeat("ab", 3); s != "ababab" {
		t.Fatalf("strings.Repeat after Trim = %q", s)
	}
	if _, err := Trim(); err != nil {
		t.Fatalf("second Trim: %v", err)
	}
}
