package testscripts

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
)

// TestFleetLockScripts runs testscripts/fleetlock/*.txtar: `crd-lock serve
// fleetlock` started in the background on a free loopback port and spoken
// to with curl, the protocol's own example client. Every script (Params)
// has the commands for it:
//
//	free-port VAR
//	    sets VAR to a TCP port free on 127.0.0.1 at that moment.
//	wait-listen ADDR
//	    waits up to 30 s until ADDR (host:port) accepts connections.
//
// and these scripts also:
//
//	client-cert NAME CN [DNS...]
//	    writes certs/NAME.pem and certs/NAME-key.pem: a client certificate
//	    with common name CN (and DNS names DNS...) signed by the CA of
//	    etcd-start -tls (certs/ca.pem).
func TestFleetLockScripts(t *testing.T) {
	p := Params("fleetlock")
	for name, cmd := range LockCmds() {
		p.Cmds[name] = cmd
	}
	p.Cmds["client-cert"] = cmdClientCert
	files, err := filepath.Glob("fleetlock/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fleetlock scripts: %v", err)
	}
	hostDirsUntouched(t)
	testscript.Run(t, p)
}

func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: free-port VAR")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := ln.Addr().(*net.TCPAddr).Port
	ts.Check(ln.Close())
	ts.Setenv(args[0], strconv.Itoa(port))
}

func cmdWaitListen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: wait-listen HOST:PORT")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", args[0], time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("wait-listen: %s not listening after 30s: %v", args[0], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func cmdClientCert(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: client-cert NAME CN [DNS...]")
	}
	dir := ts.MkAbs("certs")
	certs := &etcdtest.Certs{CA: filepath.Join(dir, "ca.pem"), CAKey: filepath.Join(dir, "ca-key.pem")}
	ts.Check(certs.IssueClientCert(filepath.Join(dir, args[0]+".pem"), filepath.Join(dir, args[0]+"-key.pem"), args[1], args[2:]...))
}
