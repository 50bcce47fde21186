package crdlock

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// StatusResult is the JSON line of crd-lock status.
type StatusResult struct {
	base
	Held     bool             `json:"held"`
	Holders  []lockinfo.Entry `json:"holders"`
	Waiters  []lockinfo.Entry `json:"waiters"`
	Revision int64            `json:"revision,omitempty"`
}

// Text renders the result for humans.
func (r *StatusResult) Text(w io.Writer) error {
	report.Line(w, "key", r.Key)
	if r.Error != "" && r.ExitCode != int(exitcode.LockBusy) {
		report.Line(w, "error", r.Error)
		return nil
	}
	if !r.Held {
		report.Line(w, "state", "free")
	}
	for i, e := range r.Holders {
		report.Line(w, fmt.Sprintf("holder %d", i+1), describe(e))
	}
	for i, e := range r.Waiters {
		report.Line(w, fmt.Sprintf("waiter %d", i+1), describe(e))
	}
	return nil
}

func describe(e lockinfo.Entry) string {
	node := e.Node
	if node == "" {
		node = "(no annotation)"
	}
	ttl := fmt.Sprintf("%ds", e.TTLRemainingSec)
	switch e.TTLRemainingSec {
	case -1:
		ttl = "expired"
	case lockinfo.TTLUnknown:
		ttl = "unknown"
	}
	s := fmt.Sprintf("%s pid %d token %d lease %s ttl %s", report.Field(node), e.PID, e.FencingToken, e.LeaseID, ttl)
	if e.AcquiredAt != nil {
		s += " since " + e.AcquiredAt.Format(time.RFC3339)
	}
	if e.Purpose != "" {
		s += " (" + report.Field(e.Purpose) + ")"
	}
	return s
}

func runStatus(ctx context.Context, o *statusOpts, args []string, stdout, stderr io.Writer) error {
	fs, f := o.fs, &o.f
	res := &StatusResult{base: base{Header: report.Header{Tool: tool}, Subcommand: "status"}, Holders: []lockinfo.Entry{}, Waiters: []lockinfo.Entry{}}
	format := report.JSON
	finish := func(err error) error { return finishResult(stdout, format, res, err) }
	cfg, key, err := f.setup(fs, args, stdout, &format, "status")
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	res.Node, res.Key = cfg.NodeName, key
	if err != nil {
		return finish(err)
	}
	client, err := f.connect(ctx, cfg)
	if err != nil {
		return finish(err)
	}
	defer client.Close()
	qctx, cancel := context.WithTimeout(ctx, time.Duration(cfg.EtcdDialTimeoutSec)*time.Second)
	defer cancel()
	info, err := lock.Status(qctx, client, key)
	if err != nil {
		return finish(err)
	}
	// A query that answered is exit 0, held or not (as clusterrebootd
	// status): the holder is in the JSON. Only a failed query is an error.
	res.Held, res.Holders, res.Waiters, res.Revision = info.Held(), info.Holders, info.Waiters, info.Revision
	return finish(nil)
}

// ReleaseResult is the JSON line of crd-lock release.
type ReleaseResult struct {
	base
	Holder   string           `json:"holder"`
	Forced   bool             `json:"forced"`
	Released []lockinfo.Entry `json:"released"`
}

// Text renders the result for humans.
func (r *ReleaseResult) Text(w io.Writer) error {
	report.Line(w, "key", r.Key)
	report.Line(w, "holder", r.Holder)
	report.Line(w, "released", len(r.Released))
	if r.Error != "" {
		report.Line(w, "error", r.Error)
	}
	return nil
}

func runRelease(ctx context.Context, o *releaseOpts, args []string, stdout, stderr io.Writer) error {
	fs, f, holder, force, leaseless := o.fs, &o.f, o.holder, o.force, o.leaseless
	res := &ReleaseResult{base: base{Header: report.Header{Tool: tool}, Subcommand: "release"}, Released: []lockinfo.Entry{}}
	format := report.JSON
	finish := func(err error) error { return finishResult(stdout, format, res, err) }
	cfg, key, err := f.setup(fs, args, stdout, &format, "release")
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	res.Node, res.Key, res.Forced = cfg.NodeName, key, *force
	res.Holder = *holder
	if res.Holder == "" {
		res.Holder = cfg.NodeName
	}
	if err != nil {
		return finish(err)
	}
	if *leaseless && (!*force || cli.IsSet(fs, "holder")) {
		return finish(exitcode.Errorf(exitcode.Config, "crd-lock: release: --leaseless removes entries whoever wrote them: give it with --force and without --holder"))
	}
	logger, err := f.common.Logger(stderr, tool)
	if err != nil {
		return finish(err)
	}
	client, err := f.connect(ctx, cfg)
	if err != nil {
		return finish(err)
	}
	defer client.Close()
	qctx, cancel := context.WithTimeout(ctx, 2*time.Duration(cfg.EtcdDialTimeoutSec)*time.Second)
	defer cancel()
	other := res.Holder != cfg.NodeName
	nothing := func() {
		logger.Warn("no entry of this node under the lock key: nothing to release; check the name with crd-lock status",
			"holder", res.Holder, "key", key)
	}
	if other && !*force {
		// Refused only when there is something to refuse: the entries exist.
		info, err := lock.Entries(qctx, client, key)
		if err != nil {
			return finish(err)
		}
		for _, e := range append(info.Holders, info.Waiters...) {
			if e.Node == res.Holder {
				return finish(exitcode.Errorf(exitcode.LockBusy, "crd-lock: release: %s is node %s's, not this node's (%s): check it is really stuck (crd-lock status), then pass --force", key, res.Holder, cfg.NodeName))
			}
		}
		nothing()
		return finish(nil)
	}
	if *leaseless {
		res.Holder = ""
		released, err := lock.EvictLeaseless(qctx, client, key)
		res.Released = released
		if err == nil && len(released) == 0 {
			logger.Warn("no entry without a lease under the lock key: nothing to release", "key", key)
		}
		return finish(err)
	}
	released, err := lock.Evict(qctx, client, key, res.Holder)
	res.Released = released
	if err == nil && len(released) == 0 && other {
		nothing()
	}
	return finish(err)
}
