package slot

import (
	"os"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
)

// embedded is the etcd server the tests share (each test uses its own namespace).
var embedded *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.RunMain(m, func(s *etcdtest.Server) { embedded = s },
		"github.com/clusterrebootd/clusterrebootd/lib/slot"))
}
