package crdgate

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("node_name: node-a\ncluster_policies:\n  fallback_nodes: [node-d]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := script("ok.sh", `echo "fallback=$FALLBACK_SET size=$CLUSTER_SIZE"`)
	fail := script("fail.sh", "echo 'quorum lost' >&2; exit 1")
	tests := []struct {
		name   string
		args   []string
		code   exitcode.Code
		stdout []string // substrings
	}{
		{"healthy json", []string{"--script", ok, "--format", "json"}, exitcode.OK,
			[]string{`"healthy":true`, `"stdout":"fallback=node-d size=\n"`}},
		{"flags reach the script", []string{"--script", ok, "--format", "json", "--fallback-set", "x,y", "--cluster-size", "7"}, exitcode.OK,
			[]string{`"stdout":"fallback=x,y size=7\n"`}},
		{"blocked text", []string{"--script", fail, "--format", "text"}, exitcode.HealthBlocked,
			[]string{"blocked: node-a may not reboot (pre-lock): health script " + fail + " exited 1: quorum lost\n", "  stderr:\n    quorum lost\n"}},
		{"config error text", []string{"--script", filepath.Join(dir, "nope"), "--format", "text"}, exitcode.Config,
			[]string{"error: gate: health script " + filepath.Join(dir, "nope") + " does not exist"}},
		{"bad flag still prints json", []string{"--nope"}, exitcode.Config, []string{`"exit_name":"config"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), append([]string{"--config", cfg}, tt.args...), nil, &stdout, &stderr)
			if got := exitcode.CodeOf(err); got != tt.code {
				t.Fatalf("code %v (%v), want %v; stderr:\n%s", got, err, tt.code, stderr.String())
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			if strings.Contains(strings.Join(tt.args, " "), "json") || tt.code == exitcode.Config && !strings.Contains(strings.Join(tt.args, " "), "text") {
				var m map[string]any
				if err := json.Unmarshal(stdout.Bytes(), &m); err != nil || strings.Count(stdout.String(), "\n") != 1 {
					t.Errorf("not one JSON line: %v\n%s", err, stdout.String())
				}
			}
		})
	}
}

func TestSplitList(t *testing.T) {
	if got := strings.Join(splitList(" a, b,,c ,"), "|"); got != "a|b|c" {
		t.Errorf("got %q", got)
	}
	if got := splitList(""); len(got) != 0 {
		t.Errorf("got %q", got)
	}
}

func TestTail(t *testing.T) {
	long := strings.Repeat("a", logTail) + "END"
	if got := tail(long); !strings.HasPrefix(got, "...") || !strings.HasSuffix(got, "END") || len(got) != logTail+3 {
		t.Errorf("len %d", len(got))
	}
	if tail("short") != "short" {
		t.Error("short changed")
	}
}
