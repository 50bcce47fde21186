package robustness

import (
	"fmt"
	"os"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
)

// endpoint is the etcd the runs share, each in a namespace of its own: an
// embedded server, or the server binary CRD_TEST_ETCD names.
var endpoint string

func TestMain(m *testing.M) {
	pkgs := []string{"github.com/clusterrebootd/clusterrebootd/lib/testonly/robustness",
		"github.com/clusterrebootd/clusterrebootd/lib/lock", "github.com/clusterrebootd/clusterrebootd/lib/slot",
		"github.com/clusterrebootd/clusterrebootd/lib/fleetlock"}
	bin := os.Getenv("CRD_TEST_ETCD")
	if bin == "" {
		os.Exit(etcdtest.RunMain(m, func(s *etcdtest.Server) { endpoint = s.Endpoint }, pkgs...))
	}
	dir, err := os.MkdirTemp("", "crd-robustness-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err := etcdtest.Start(etcdtest.Options{Binary: bin, Dir: dir})
	if err != nil {
		fmt.Fprintf(os.Stderr, "robustness: starting %s (CRD_TEST_ETCD): %v\n", bin, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	endpoint = srv.Endpoint
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	if code == 0 {
		if leaked := etcdtest.LeakedGoroutines(etcdtest.LeakLimit, pkgs...); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left running after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}
