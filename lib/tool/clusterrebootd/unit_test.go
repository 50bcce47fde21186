package clusterrebootd

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// unitService returns the [Service] settings of the shipped unit, each key's
// values in file order.
func unitService(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("../../../packaging/clusterrebootd.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	settings := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			settings[k] = append(settings[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return settings
}

// `systemctl reload` runs validate-config on the file ExecStart reads and
// signals the daemon only when it passes: systemd runs ExecReload= lines in
// order and stops at the first that fails, so a broken file fails the reload
// and the running configuration stays.
func TestUnitReloadValidatesFirst(t *testing.T) {
	s := unitService(t)
	start := strings.Fields(s["ExecStart"][0])
	i := strings.Index(s["ExecStart"][0], "--config ")
	if len(start) < 2 || i < 0 {
		t.Fatalf("ExecStart %q names no --config", s["ExecStart"][0])
	}
	configPath := strings.Fields(s["ExecStart"][0][i:])[1]
	reload := s["ExecReload"]
	if len(reload) != 2 {
		t.Fatalf("ExecReload %q: want validate-config, then the signal", reload)
	}
	validate := strings.Fields(reload[0])
	if len(validate) < 4 || validate[0] != start[0] || validate[1] != "validate-config" || !strings.Contains(reload[0], " --config "+configPath) {
		t.Errorf("first ExecReload %q: want %s validate-config --config %s", reload[0], start[0], configPath)
	}
	if !strings.Contains(reload[1], `kill -HUP "$MAINPID"`) {
		t.Errorf("second ExecReload %q does not send SIGHUP to the main process", reload[1])
	}

	// The first line, run as written against a scratch file in place of
	// the real one, fails on a broken configuration and passes a good one.
	dir := t.TempDir()
	tests := []struct {
		name, content string
		want          exitcode.Code
	}{
		{"valid", "check_interval_sec: 30\nreboot_required_detectors: [{type: file, path: /run/reboot-required}]\n", exitcode.OK},
		{"unknown key", "check_interval: 30\n", exitcode.Config},
		{"bad value", "check_interval_sec: -1\n", exitcode.Config},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, tt.name+".yaml")
			if err := os.WriteFile(file, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			args := strings.Fields(strings.Replace(reload[0], configPath, file, 1))[1:]
			var out bytes.Buffer
			err := Run(context.Background(), args, strings.NewReader(""), &out, io.Discard)
			if got := exitcode.CodeOf(err); got != tt.want {
				t.Errorf("%v: exit %d (%v), want %d\n%s", args, got, err, tt.want, out.String())
			}
		})
	}
}
