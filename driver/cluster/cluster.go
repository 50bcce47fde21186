// Package cluster is the cluster half of clusterrebootd: everything the daemon
// needs from etcd, run as the short-lived child `crd-lock step NAME`.
//
// Synopsis (from the daemon):
//
//	crd-lock step NAME < request.json
//
// Synopsis (by hand; the request's args as flags):
//
//	crd-lock step publish --state S --reboot-required=BOOL --last-check RFC3339 [--detail TEXT] [--read-summary] [--read-view] [--blocked-since RFC3339 --blocked-reason R] [--required-since RFC3339] < config.yaml
//	crd-lock step cycle [--attempt N] [--no-wait] < config.yaml
//	crd-lock step complete [--keep] < config.yaml
//	crd-lock step status < config.yaml
//	crd-lock step report < config.yaml
//	crd-lock step pause --reason TEXT < config.yaml
//	crd-lock step resume [--reason TEXT] < config.yaml
//	crd-lock step hold --node NODE --reason TEXT [--force] < config.yaml
//	crd-lock step release-hold --node NODE < config.yaml
//	crd-lock step request --node NODE --reason TEXT [--force] [--now] < config.yaml
//	crd-lock step failure --kind KIND --detail TEXT --since RFC3339 < config.yaml
//	crd-lock step check-notifications < config.yaml
//	crd-lock step alerts --phase PHASE < config.yaml
//	crd-lock step serve-metrics --listen ADDR --file PATH
//
// Description: the daemon (package driver, which links no etcd code)
// starts one of these steps when it needs the cluster and writes one
// protocol.Request on its stdin: the step, its arguments and its effective
// configuration, which it validated and which is not validated again here.
// The step writes exactly one JSON object (the *Result types of
// driver/protocol) on stdout; logs go to stderr as JSON. One table (steps,
// stepcall.go) routes the names to their handlers. cycle acquires the lock
// and, under it, re-checks everything, takes the reboot slot in a
// transaction guarded by lock ownership, runs the pre-reboot hooks and the
// reboot command. alerts runs the gate's alert and PromQL checks for the
// daemon's pre-lock and post-reboot phases (no etcd). The protocol, the
// etcd keys and their values are described in docs/cluster-protocol.md.
//
// Exit status: the table of lib/exitcode (docs/exit-codes.md): 0 done,
// 1 no reboot needed any more, 2 configuration or usage, 3 policy or health
// blocked, 4 lock lost or slot transaction refused, 5 window closed, 6 kill
// switch or pause, 7 etcd unavailable, 8 detector failed, 9 hook or reboot
// command failed, 70 bug or a request of another protocol version, 130
// interrupted (SIGTERM).
//
// Example:
//
//	crd-lock step status < /etc/clusterrebootd/config.yaml | jq .view.rebooting
//
// (the file must set node_name: the daemon fills it in from the hostname
// before it builds its request).
//
// Nothing here imports package driver, nor does driver import this: both
// import driver/protocol only.
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/etcd"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/logging"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
	"github.com/clusterrebootd/clusterrebootd/lib/slotnotify"
	"github.com/clusterrebootd/clusterrebootd/lib/testclock"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
)

// Tool names the program in every JSON header.
const Tool = protocol.ChildTool

// maxConfig bounds the configuration read from stdin.
const maxConfig = 4 << 20

// world is what a step sees of the machine besides etcd. RunStep uses the
// real one; tests replace parts of it.
type world struct {
	now    func() time.Time
	rand   func() float64
	runner proc.Runner
	// root is the file system root for the boot id and the detectors.
	root string
	// uname, when set, replaces uname(2) for kernel detectors.
	uname func() (string, error)
	// bootID and machineID, when set, replace the ids read under root
	// (tests: a node that "reboots" gets a new boot id).
	bootID    func() (string, error)
	machineID func() string
	// beforeSlot, when set, runs just before the slot transaction (tests use
	// it to take the lock away at the worst moment).
	beforeSlot func()
	// recheck, when set, replaces lock.Recheck while waiting for a slot;
	// beforeWatch, when set, runs each time the wait for a slot starts a
	// watch (tests count the re-reads).
	recheck     time.Duration
	beforeWatch func()
}

// realWorld reads the wall clock through lib/testclock (time.Now, unless
// built with the crdtestclock tag), like the daemon.
func realWorld() world {
	return world{now: testclock.Now, rand: rand.Float64, runner: proc.Exec{}}
}

// session is one step's connection and configuration.
type session struct {
	cfg    config.Config
	client *clientv3.Client
	log    *slog.Logger
	w      world
	// ns is the etcd namespace, ending in "/".
	ns string
	// rpc bounds each single etcd request (etcd_dial_timeout_sec).
	rpc time.Duration
	// sender sends this step's notifications (nil until the first).
	sender *slotnotify.Sender
	// stdin is what the step's stdin holds after its request
	// (serve-metrics' liveness pipe).
	stdin io.Reader
}

// RunStep runs `crd-lock step NAME [flags]`: args[0] is the step name. The
// configuration is read from stdin (except for serve-metrics, whose stdin is
// only watched for EOF); exactly one JSON object is written to stdout.
func RunStep(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return runStep(ctx, args, stdin, stdout, stderr, realWorld())
}

func runStep(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, w world) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		h := &report.Header{Tool: Tool}
		return emit(stdout, h, h, exitcode.Errorf(exitcode.Config, "crd-lock step: name a step: %s", strings.Join(protocol.Steps(), ", ")))
	}
	name, flags := args[0], args[1:]
	h, ok := steps[name]
	if !ok {
		h := &report.Header{Tool: Tool}
		return emit(stdout, h, h, exitcode.Errorf(exitcode.Config, "crd-lock step: unknown step %q: use one of %s", name, strings.Join(protocol.Steps(), ", ")))
	}
	fs := flag.NewFlagSet("crd-lock step "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	common := registerCommon(fs, w.root)
	c := h.newCall(fs)
	c.hdr.Tool = Tool
	if err := parseFlags(fs, flags); err != nil {
		return emit(stdout, c.res, c.hdr, err)
	}
	in, err := readInput(stdin, name, h.need, len(flags) > 0)
	if err == nil && in.req != nil {
		err = in.req.DecodeArgs(c.args)
		common.apply(in.req)
	}
	if in.cfg != nil {
		c.hdr.Node = in.cfg.NodeName
	}
	if err != nil {
		return emit(stdout, c.res, c.hdr, err)
	}
	w.root = *common.root
	log, err := logging.New(stderr, Tool, *common.logLevel, *common.logFormat)
	if err != nil {
		return emit(stdout, c.res, c.hdr, err)
	}
	log = log.With("step", name)
	var cfg config.Config
	if in.cfg != nil {
		cfg = *in.cfg
		log = log.With("node", cfg.NodeName)
	}
	s := newSession(cfg, log, w, in.rest)
	if h.need < needEtcd {
		return emit(stdout, c.res, c.hdr, c.run(ctx, s))
	}
	if err := s.connect(ctx, name); err != nil {
		return emit(stdout, c.res, c.hdr, err)
	}
	defer s.client.Close()
	err = c.run(ctx, s)
	pa, _ := c.args.(*protocol.PublishArgs)
	if pa == nil {
		pa = &protocol.PublishArgs{}
	}
	s.notifyAfter(ctx, name, *pa, c.res, err)
	return emit(stdout, c.res, c.hdr, err)
}

// input is what a step read from stdin: the daemon's request, or by hand a
// YAML configuration; rest is what stdin holds after the request
// (serve-metrics' liveness pipe).
type input struct {
	req  *protocol.Request
	cfg  *config.Config
	rest io.Reader
}

// apply takes the request's root and logging over the flags' defaults.
func (f commonFlags) apply(r *protocol.Request) {
	if r.Root != "" {
		*f.root = r.Root
	}
	if r.LogLevel != "" {
		*f.logLevel = r.LogLevel
	}
	if r.LogFormat != "" {
		*f.logFormat = r.LogFormat
	}
}

// readInput reads a step's stdin. From the daemon it is one request
// (protocol.Request), whose configuration the daemon validated and which
// is not validated again; by hand (flags given, or stdin not a JSON
// object) it is the configuration as YAML, parsed and validated. A step
// that needs no configuration (serve-metrics) reads a request only when
// it got no flags, and keeps the rest of stdin as its liveness pipe.
func readInput(stdin io.Reader, name string, n need, byHand bool) (input, error) {
	if n == needNothing {
		if byHand || stdin == nil {
			return input{rest: stdin}, nil
		}
		dec := json.NewDecoder(stdin)
		var req protocol.Request
		if err := dec.Decode(&req); err != nil {
			return input{}, exitcode.Errorf(exitcode.Config, "crd-lock step %s: no request on stdin (%v): by hand, pass its flags (see --help)", name, err)
		}
		return input{req: &req, rest: io.MultiReader(dec.Buffered(), stdin)}, req.Check(name)
	}
	if stdin == nil {
		return input{}, exitcode.Errorf(exitcode.Config, "crd-lock step: no configuration on stdin: the daemon passes its request; by hand pass the configuration as YAML (< /etc/clusterrebootd/config.yaml)")
	}
	data, err := io.ReadAll(io.LimitReader(stdin, maxConfig+1))
	if err != nil {
		return input{}, exitcode.Errorf(exitcode.Config, "crd-lock step: reading the configuration from stdin: %v", err)
	}
	if len(data) > maxConfig {
		return input{}, exitcode.Errorf(exitcode.Config, "crd-lock step: the configuration on stdin exceeds %d bytes", maxConfig)
	}
	if strings.TrimSpace(string(data)) == "" {
		return input{}, exitcode.Errorf(exitcode.Config, "crd-lock step: stdin is empty: pass the effective configuration as YAML (the daemon does; by hand: < /etc/clusterrebootd/config.yaml)")
	}
	if !protocol.IsRequest(data) {
		cfg, err := readConfig(data)
		return input{cfg: &cfg}, err
	}
	if byHand {
		return input{}, exitcode.Errorf(exitcode.Config, "crd-lock step %s: flags and a request on stdin: the request carries the arguments (by hand, pass the configuration as YAML)", name)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req protocol.Request
	if err := dec.Decode(&req); err != nil {
		return input{}, exitcode.Errorf(exitcode.Config, "crd-lock step %s: stdin is neither a step request (%v) nor a YAML configuration: by hand, pass the configuration as YAML in block style (< /etc/clusterrebootd/config.yaml)", name, err)
	}
	if req.Config == nil {
		if err := req.Check(name); err != nil {
			return input{req: &req}, err
		}
		return input{req: &req}, exitcode.Errorf(exitcode.Internal, "crd-lock step %s: the request on stdin carries no configuration", name)
	}
	if err := req.Check(name); err != nil {
		return input{req: &req, cfg: req.Config}, err
	}
	return input{req: &req, cfg: req.Config}, nil
}

// readConfig parses and validates a configuration given by hand.
func readConfig(data []byte) (config.Config, error) {
	cfg, err := config.Parse("stdin", data)
	if err != nil {
		return cfg, exitcode.New(exitcode.Config, err)
	}
	if err := config.Validate(&cfg, "stdin", window.Validate); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// emit settles the header from err, fills the reason of a blocked cycle,
// writes the one JSON object and returns err.
func emit(stdout io.Writer, res any, hdr *report.Header, err error) error {
	hdr.Tool = Tool
	if errors.Is(err, flag.ErrHelp) {
		err = nil
	}
	hdr.Settle(err)
	if c, ok := res.(*protocol.CycleResult); ok && err != nil {
		code := exitcode.CodeOf(err)
		if c.Outcome == "" {
			c.Outcome = protocol.OutcomeBlocked
		}
		if c.Reason == "" && code != exitcode.Config && code != exitcode.Internal {
			c.Reason = protocol.CodeReason(code)
		}
		if c.Detail == "" {
			c.Detail = err.Error()
		}
	}
	if werr := report.Write(stdout, report.JSON, res); werr != nil && err == nil {
		return exitcode.New(exitcode.Internal, werr)
	}
	return err
}

// rpcCtx bounds one etcd request.
func (s *session) rpcCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.rpc)
}

// etcdErr codes an etcd request failure: 130 when ctx was cancelled (SIGTERM),
// else 7 naming the endpoints.
func (s *session) etcdErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
		return exitcode.Errorf(exitcode.Interrupted, "cluster: interrupted while %s", what)
	}
	return exitcode.New(exitcode.EtcdUnavailable, fmt.Errorf("cluster: %s: %w", what, etcd.Unavailable(s.cfg.EtcdEndpoints, err)))
}

// fresh is a bounded context for clean-up that must happen even after ctx
// was cancelled (releasing the lock, freeing a slot).
func (s *session) fresh() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.rpc)
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

// ids are this boot's and this machine's ids (lib/reboot, under root).
func (w world) ids() (bootID, machineID string, bootErr error) {
	if w.bootID != nil {
		bootID, bootErr = w.bootID()
	} else {
		bootID, bootErr = reboot.BootID(w.root)
	}
	if w.machineID != nil {
		machineID = w.machineID()
	} else {
		machineID = reboot.MachineID(w.root)
	}
	return bootID, machineID, bootErr
}
