package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errSessionLost, true},
		{errWatchClosed, true},
		{context.DeadlineExceeded, true},
		{errors.New("rpc error: code = Unavailable desc = connection reset"), true},
		{errors.New("etcdserver: no leader"), true},
		{errors.New("etcdserver: permission denied"), false},
		{errors.New("etcdserver: authentication failed, invalid user ID or password"), false},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			if got := retryable(tc.err); got != tc.want {
				t.Errorf("retryable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCtxError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), -time.Second)
	defer cancel2()
	conn := errors.New("connection refused")
	for _, tc := range []struct {
		name          string
		ctx           context.Context
		lastConn, err error
		want          exitcode.Code
	}{
		{"cancelled", cancelled, nil, context.Canceled, exitcode.Interrupted},
		{"deadline while queued", expired, conn, errInLine, exitcode.LockBusy},
		{"deadline after connection failures", expired, conn, context.DeadlineExceeded, exitcode.EtcdUnavailable},
		{"deadline on a slow request", expired, nil, errors.New("rpc error: code = DeadlineExceeded"), exitcode.EtcdUnavailable},
		{"deadline otherwise", expired, nil, errors.New("odd"), exitcode.LockBusy},
		{"deadline after our place was lost", expired, nil, ErrPlaceLost, exitcode.LockBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitcode.CodeOf(ctxError(tc.ctx, "/k", tc.lastConn, tc.err)); got != tc.want {
				t.Errorf("ctxError = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseLeaseIDAndSince(t *testing.T) {
	if _, err := ParseLeaseID("zz"); err == nil {
		t.Error("ParseLeaseID(zz) succeeded")
	}
	if id, err := ParseLeaseID("1f"); err != nil || id != 31 {
		t.Errorf("ParseLeaseID(1f) = %d, %v", id, err)
	}
	if d := (lockinfo.Entry{}).Since(time.Now()); d != 0 {
		t.Errorf("a waiter's Since = %s, want 0", d)
	}
}

func TestPermissionDeniedIsNotRetried(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	err := unavailable(c, errors.New("etcdserver: permission denied"))
	if exitcode.CodeOf(err) != exitcode.EtcdUnavailable {
		t.Errorf("unavailable = %v, want etcd_unavailable", err)
	}
	coded := exitcode.Errorf(exitcode.Config, "x")
	if unavailable(c, coded) != coded {
		t.Error("an already coded error was re-coded")
	}
}
