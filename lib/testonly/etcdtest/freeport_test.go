package etcdtest

import (
	"net"
	"strconv"
	"testing"
)

// FreePort's ports lie below the kernel's ephemeral range, where no
// outgoing connection can take them before the server binds, and one
// process never gets the same port twice (a cluster asks for nine before
// its first member binds any).
func TestFreePortAvoidsTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if low > 11000 && (p < 10000 || p >= low) {
			t.Fatalf("port %d is outside 10000..%d, below the ephemeral range", p, low-1)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		_ = l.Close()
	}
}
