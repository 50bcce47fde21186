package main

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReceiverRecordsAndAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		status int
	}{
		{"ok", nil, 200},
		{"500", []string{"--status", "500"}, 500},
		{"hang", []string{"--hang"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			addrFile, out := filepath.Join(dir, "addr"), filepath.Join(dir, "out")
			done := make(chan error, 1)
			go func() { done <- run(append([]string{"--addr-file", addrFile, "--out", out}, tc.args...)) }()
			var addr string
			for i := 0; i < 100 && addr == ""; i++ {
				b, _ := os.ReadFile(addrFile)
				addr = strings.TrimSpace(string(b))
				time.Sleep(20 * time.Millisecond)
			}
			c := &http.Client{Timeout: 500 * time.Millisecond}
			resp, err := c.Post("http://"+addr+"/hook", "application/json", strings.NewReader(`{"event":"x"}`))
			if tc.status == 0 {
				if err == nil {
					t.Fatalf("--hang answered %s", resp.Status)
				}
			} else if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("POST: %v %v, want status %d", resp, err, tc.status)
			}
			f, _ := os.Open(out)
			line, _ := bufio.NewReader(f).ReadString('\n')
			_ = f.Close()
			if !strings.Contains(line, `"body":{"event":"x"}`) || !strings.Contains(line, `"path":"/hook"`) {
				t.Fatalf("recorded %q", line)
			}
		})
	}
}
