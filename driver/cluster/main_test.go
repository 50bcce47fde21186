package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gopkg.in/yaml.v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/etcdtest"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
)

// embedded is the etcd server the tests share; each test works under its
// own namespace.
var embedded *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.RunMain(m, func(s *etcdtest.Server) { embedded = s },
		"github.com/clusterrebootd/clusterrebootd/driver/cluster", "github.com/clusterrebootd/clusterrebootd/lib/lock"))
}

// node is one simulated node: its files and its configuration.
type node struct {
	t        testing.TB
	name     string
	dir      string
	cfg      map[string]any
	needed   string // the file detector's marker
	health   string // the health script
	calls    string // the reboot command appends a line here
	killFile string
	endpoint string
	// boot and machine, when set, are the node's boot id and machine id
	// (default: the host's); a test "reboots" the node by changing boot.
	boot, machine string
	// byHand runs the steps as `crd-lock step NAME [flags] < config.yaml`
	// instead of with the daemon's request.
	byHand bool
}

// newNode makes a node under namespace /t/<ns>/ whose detector says "needed",
// whose health script exits 0 and whose reboot command only records its call.
func newNode(t testing.TB, endpoint, ns, name string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{t: t, name: name, dir: dir, endpoint: endpoint,
		needed: filepath.Join(dir, "reboot-required"), health: filepath.Join(dir, "health.sh"),
		calls: filepath.Join(dir, "reboot-calls"), killFile: filepath.Join(dir, "disable")}
	writeFile(t, n.needed, "")
	script(t, n.health, "exit 0")
	script(t, filepath.Join(dir, "reboot.sh"), `echo "$1 $(date +%s.%N)" >> `+n.calls)
	n.cfg = map[string]any{
		"node_name":                   name,
		"etcd_endpoints":              []string{endpoint},
		"etcd_dial_timeout_sec":       2,
		"lock_key":                    "/t/" + ns + "/lock",
		"lock_ttl_sec":                5,
		"max_holders":                 1,
		"health_timeout_sec":          3,
		"health_publish_interval_sec": 10,
		"backoff_min_sec":             1,
		"backoff_max_sec":             1,
		"health_script":               n.health,
		"reboot_required_detectors":   []map[string]any{{"type": "file", "path": n.needed}},
		"reboot_command":              []string{filepath.Join(dir, "reboot.sh"), name},
		"kill_switch_file":            n.killFile,
		"state_dir":                   filepath.Join(dir, "state"),
		"run_dir":                     filepath.Join(dir, "run"),
		"reboot_slot_ttl_sec":         60,
		"windows":                     map[string]any{"timezone": "UTC"},
	}
	return n
}

// cleaned remembers the tests whose namespace was already emptied.
var cleaned sync.Map

// nsName turns a test name into a namespace segment. The first call in a
// test deletes whatever an earlier run (-count N) left under it.
func nsName(t testing.TB) string {
	ns := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "_")
	if _, done := cleaned.LoadOrStore(t, true); !done {
		c := testsupport.NewClient(t, embedded.Endpoint)
		if _, err := c.Delete(context.Background(), "/t/"+ns+"/", clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cleaned.Delete(t) })
	}
	return ns
}

func (n *node) yaml() string {
	b, err := yaml.Marshal(n.cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	return string(b)
}

// outcome is one step run.
type outcome struct {
	code   exitcode.Code
	err    error
	stdout string
	stderr string
	json   map[string]any
}

func (o outcome) str(key string) string {
	s, _ := o.json[key].(string)
	return s
}

// step runs a step for n with the real world (plus edits).
// Its stderr goes to errb when given (to watch it while the step runs).
func (n *node) step(ctx context.Context, args []string, edit func(*world), errb *testsupport.SyncBuffer) outcome {
	argv, stdin := n.stdin(args)
	return n.exec(ctx, argv, stdin, edit, errb)
}

// stepRequest runs req's step for n, its configuration n's (the daemon's
// path).
func (n *node) stepRequest(ctx context.Context, req protocol.Request, edit func(*world)) outcome {
	cfg, err := config.Parse("node.yaml", []byte(n.yaml()))
	if err != nil {
		n.t.Fatal(err)
	}
	req.Config = &cfg
	data, err := req.Encode()
	if err != nil {
		n.t.Fatal(err)
	}
	return n.exec(ctx, []string{req.Step}, bytes.NewReader(data), edit, nil)
}

// exec runs runStep with argv and stdin for n.
func (n *node) exec(ctx context.Context, args []string, stdin io.Reader, edit func(*world), errb *testsupport.SyncBuffer) outcome {
	w := realWorld()
	if n.boot != "" {
		boot := n.boot
		w.bootID = func() (string, error) { return boot, nil }
	}
	if n.machine != "" {
		machine := n.machine
		w.machineID = func() string { return machine }
	}
	if edit != nil {
		edit(&w)
	}
	if errb == nil {
		errb = &testsupport.SyncBuffer{}
	}
	var out testsupport.SyncBuffer
	err := runStep(ctx, args, stdin, &out, errb, w)
	o := outcome{code: exitcode.CodeOf(err), err: err, stdout: out.String(), stderr: errb.String()}
	if strings.Count(o.stdout, "\n") != 1 {
		n.t.Errorf("%s %v: stdout is not exactly one line:\n%s", n.name, args, o.stdout)
	}
	if err := json.Unmarshal([]byte(o.stdout), &o.json); err != nil {
		n.t.Errorf("%s %v: stdout is not JSON: %v\n%s", n.name, args, err, o.stdout)
	}
	if got := int(o.code); o.json != nil && int(o.json["exit_code"].(float64)) != got {
		n.t.Errorf("%s %v: JSON exit_code %v, returned %d", n.name, args, o.json["exit_code"], got)
	}
	return o
}

// stdin is what a step gets for args: the daemon's request, with the step's
// flags in args parsed as crd-lock step parses them by hand, and argv
// then only the step's name. With n.byHand, flags the step refuses or a
// configuration the daemon would refuse, it is args as they are and the
// configuration as YAML (by hand).
func (n *node) stdin(args []string) (argv []string, stdin io.Reader) {
	if n.byHand || len(args) == 0 {
		return args, strings.NewReader(n.yaml())
	}
	h, ok := steps[args[0]]
	if !ok {
		return args, strings.NewReader(n.yaml())
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	common := registerCommon(fs, "")
	c := h.newCall(fs)
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return args, strings.NewReader(n.yaml())
	}
	var a any
	if c.args != nil {
		a = reflect.ValueOf(c.args).Elem().Interface()
	}
	cfg, err := config.Parse("node.yaml", []byte(n.yaml()))
	if err != nil || config.Validate(&cfg, "node.yaml", window.Validate) != nil {
		return args, strings.NewReader(n.yaml())
	}
	req, err := protocol.NewRequest(args[0], a, &cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	req.Root, req.LogLevel, req.LogFormat = *common.root, *common.logLevel, *common.logFormat
	data, err := req.Encode()
	if err != nil {
		n.t.Fatal(err)
	}
	return args[:1], bytes.NewReader(data)
}

func (n *node) run(args ...string) outcome { return n.step(context.Background(), args, nil, nil) }

func (n *node) rebootCalls() []string {
	b, err := os.ReadFile(n.calls)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.Fields(strings.TrimSpace(string(b)))
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func script(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// expectRebooting waits up to limit for the cycle run that answers on done
// (what) and fails the test unless it went on to reboot.
func expectRebooting(t testing.TB, done <-chan outcome, limit time.Duration, what string) {
	t.Helper()
	select {
	case o := <-done:
		if o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
			t.Fatalf("%s = %d %s\n%s", what, o.code, o.stdout, o.stderr)
		}
	case <-time.After(limit):
		t.Fatalf("%s did not go on to reboot within %s", what, limit)
	}
}
