package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The daemon's idle memory budget (4 MiB, docs/performance.md) holds only if
// it links no etcd, gRPC, net/http, Prometheus client or terminal-styling
// code: merely linking the etcd client costs ~9 MiB. Everything that talks to
// etcd runs in the crd-lock child.
func TestDaemonImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"go.etcd.io/", "google.golang.org/grpc", "net/http", "github.com/prometheus/", "github.com/charmbracelet/"}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed only %d packages: %q", len(deps), out)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == strings.TrimSuffix(f, "/") || strings.HasPrefix(dep, f) {
				t.Errorf("clusterrebootd links %s (forbidden prefix %s): keep etcd/HTTP code in crd-lock", dep, f)
			}
		}
	}
}
