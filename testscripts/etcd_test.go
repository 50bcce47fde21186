package testscripts

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
)

// LockCmds are the custom testscript commands of the crd-lock scripts:
//
//	etcd-start [-tls] [-auth] [-binary]
//	    starts a throwaway etcd on random loopback ports (the binary named by
//	    CRD_TEST_ETCD, else an embedded server), writes $WORK/crd.yaml for it
//	    (with run_dir $WORK/run) and points CRD_CONFIG there; drop-ins go to $WORK/config.d/. Sets
//	    ETCD_ENDPOINT. -tls serves mutual TLS with certificates generated in
//	    $WORK/certs; -auth enables etcd auth with a role granting only
//	    /cluster/clusterrebootd/ to user crd (password file $WORK/etcd-password).
//	    -binary starts the server binary (CRD_TEST_ETCD, else etcd on PATH) in
//	    a process of its own, whose /metrics count this script's requests only
//	    (guard it with [etcd-binary]). The server stops when the script ends.
//	etcd-requests [-since N] [-max M] VAR
//	    sets VAR to the number of unary gRPC requests (every Range, Txn, Put,
//	    lease grant, ...: grpc_server_started_total{grpc_type="unary"}) the
//	    server of etcd-start -binary has started; with -since, those after
//	    count N; with -max, fails when there are more than M.
//	waitfile FILE
//	    waits up to 30 s for FILE to exist (a background command's signal).
//
// And the condition [etcd-binary]: an etcd server binary is at hand
// (CRD_TEST_ETCD, or etcd on PATH: make etcd).
func LockCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"etcd-start":    CmdEtcdStart,
		"etcd-requests": CmdEtcdRequests,
		"waitfile":      CmdWaitFile,
	}
}

// etcdBinary is the etcd server binary for etcd-start -binary ("": none).
func etcdBinary() string {
	if bin := os.Getenv("CRD_TEST_ETCD"); bin != "" {
		return bin
	}
	bin, _ := exec.LookPath("etcd")
	return bin
}

// CmdEtcdStart implements etcd-start (see LockCmds).
func CmdEtcdStart(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("usage: etcd-start [-tls] [-auth] [-binary] (no negation)")
	}
	fs := flag.NewFlagSet("etcd-start", flag.ContinueOnError)
	useTLS := fs.Bool("tls", false, "mutual TLS")
	useAuth := fs.Bool("auth", false, "etcd authentication")
	useBinary := fs.Bool("binary", false, "the server binary in a process of its own")
	if err := fs.Parse(args); err != nil {
		ts.Fatalf("etcd-start: %v", err)
	}
	bin := os.Getenv("CRD_TEST_ETCD")
	if *useBinary {
		if bin = etcdBinary(); bin == "" {
			ts.Fatalf("etcd-start -binary: no etcd server binary: set CRD_TEST_ETCD or put etcd on PATH (make etcd); guard the line with [etcd-binary]")
		}
	}
	work := ts.Getenv("WORK")
	var certs *etcdtest.Certs
	if *useTLS {
		var err error
		certs, err = etcdtest.GenerateCerts(filepath.Join(work, "certs"))
		ts.Check(err)
	}
	srv, err := etcdtest.Start(etcdtest.Options{Binary: bin, Dir: filepath.Join(work, ".etcd"), TLS: certs})
	ts.Check(err)
	ts.Defer(srv.Stop)
	// run_dir in the script's work dir: the default (/run/clusterrebootd)
	// is one for every script running at once, and the publish lease and
	// rules cache one script remembers there are another etcd's to the
	// next (a second publication that found its lease "expired" rewrote
	// the group key crd-lock_publish_group_index checks).
	run := filepath.Join(work, "run")
	ts.Check(os.MkdirAll(run, 0o755))
	cfg := []string{
		"etcd_endpoints: [\"" + srv.Endpoint + "\"]",
		"run_dir: " + run,
		"etcd_dial_timeout_sec: 3",
		"health_timeout_sec: 2",
		"lock_ttl_sec: 5",
		"backoff_min_sec: 1",
		"backoff_max_sec: 2",
	}
	if certs != nil {
		cfg = append(cfg, "etcd_tls:", "  enabled: true", "  ca_file: "+certs.CA,
			"  cert_file: "+certs.ClientCert, "  key_file: "+certs.ClientKey)
	}
	if *useAuth {
		admin, err := srv.Client(certs)
		ts.Check(err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = etcdtest.EnableAuth(ctx, admin, "rootpw", "clusterrebootd", "crd", "crdpw", "/cluster/clusterrebootd/")
		cancel()
		admin.Close()
		ts.Check(err)
		pw := filepath.Join(work, "etcd-password")
		ts.Check(os.WriteFile(pw, []byte("crdpw\n"), 0o600))
		cfg = append(cfg, "etcd_username: crd", "etcd_password_file: "+pw)
	}
	conf := filepath.Join(work, "crd.yaml")
	ts.Check(os.WriteFile(conf, []byte(strings.Join(cfg, "\n")+"\n"), 0o644))
	ts.Setenv("CRD_CONFIG", conf)
	ts.Setenv("ETCD_ENDPOINT", srv.Endpoint)
	if bin != "" && certs == nil {
		// An embedded server's metrics are its process's: every script's.
		ts.Setenv("ETCD_METRICS_URL", srv.Endpoint+"/metrics")
	}
	ts.Logf("etcd-start: %s (binary %q)", srv.Endpoint, bin)
}

// CmdEtcdRequests implements etcd-requests (see LockCmds).
func CmdEtcdRequests(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("etcd-requests", flag.ContinueOnError)
	since := fs.Int64("since", 0, "count only the requests after this count")
	most := fs.Int64("max", -1, "fail above this many")
	if err := fs.Parse(args); err != nil || neg || fs.NArg() != 1 {
		ts.Fatalf("usage: etcd-requests [-since N] [-max M] VAR (no negation)")
	}
	url := ts.Getenv("ETCD_METRICS_URL")
	if url == "" {
		ts.Fatalf("etcd-requests: no metrics of this script's own: start the server with etcd-start -binary (without -tls)")
	}
	n, err := unaryRequests(url)
	ts.Check(err)
	n -= *since
	ts.Logf("etcd-requests: %d unary requests (grpc_server_started_total) since %d", n, *since)
	if *most >= 0 && n > *most {
		ts.Fatalf("etcd-requests: %d requests, more than %d", n, *most)
	}
	ts.Setenv(fs.Arg(0), strconv.FormatInt(n, 10))
}

// unaryRequests sums grpc_server_started_total{grpc_type="unary"} of the
// etcd server at url (its /metrics).
func unaryRequests(url string) (int64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_started_total{") || !strings.Contains(line, `grpc_type="unary"`) {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("etcd-requests: %q: %v", line, err)
		}
		sum += f
	}
	return int64(sum), sc.Err()
}

// etcdCondition answers the scripts' etcd conditions:
//
//	[etcdctl]   etcdctl is on PATH (make etcd puts it in .tools/bin), or
//	            CRD_TEST_ETCD names a server binary: the integration runs
//	            (make test-lock-integration) then fail without it, never skip.
//	[etcd-3.4]  CRD_TEST_ETCD is an etcd 3.4 server (Debian's), which checks
//	            less than the pinned one (docs/security.md says what).
func etcdCondition(cond string) (ok, handled bool) {
	switch cond {
	case "etcdctl":
		_, err := exec.LookPath("etcdctl")
		return err == nil || os.Getenv("CRD_TEST_ETCD") != "", true
	case "etcd-3.4":
		bin := os.Getenv("CRD_TEST_ETCD")
		if bin == "" {
			return false, true // the embedded server is the pinned release
		}
		out, err := exec.Command(bin, "--version").Output()
		return err == nil && strings.HasPrefix(string(out), "etcd Version: 3.4."), true
	}
	return false, false
}

// CmdWaitFile implements waitfile (see LockCmds).
func CmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	file := ts.MkAbs(args[0])
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(file); err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile: %s did not appear within 30s", args[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCrdLockScripts runs the crd-lock scripts with LockCmds for as long as
// the shared Params do not register them; once they do, TestScripts runs
// them and this test skips.
func TestCrdLockScripts(t *testing.T) {
	p := Params(".")
	if _, ok := p.Cmds["etcd-start"]; ok {
		t.Skip("TestScripts runs the crd-lock scripts")
	}
	for name, cmd := range LockCmds() {
		p.Cmds[name] = cmd
	}
	files, err := filepath.Glob("crd-lock_*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatal(fmt.Sprint("no crd-lock scripts: ", err))
	}
	p.Dir, p.Files = "", files
	hostDirsUntouched(t)
	testscript.Run(t, p)
}
