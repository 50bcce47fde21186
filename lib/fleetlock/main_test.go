package fleetlock

import (
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/clusterrebootd/clusterrebootd/lib/etcd/etcdtest"
)

// embedded is the etcd server the tests share (each test uses its own namespace).
var embedded *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.RunMain(m, func(s *etcdtest.Server) { embedded = s },
		"github.com/clusterrebootd/clusterrebootd/lib/fleetlock",
		"github.com/clusterrebootd/clusterrebootd/lib/lock"))
}

func newClient(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{embedded.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
