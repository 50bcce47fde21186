package alertgate

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/matcher"
)

// fakeServer answers path with status and body, and records the queries.
func fakeServer(t *testing.T, status int, body string, delay time.Duration) (*httptest.Server, *[]string) {
	t.Helper()
	var (
		mu      sync.Mutex
		queries []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		queries = append(queries, r.URL.Path+"?"+r.Form.Encode())
		mu.Unlock()
		if u, p, ok := r.BasicAuth(); ok && (u != "crd" || p != "s3cret") {
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	// The caller reads queries after its request: srv.Close waits for the
	// handlers, so a test that reads after a timeout calls it first.
	return srv, &queries
}

const amAlerts = `[
 {"labels":{"alertname":"NodeDown","instance":"web-1:9100","severity":"critical"},"status":{"state":"active","silencedBy":[],"inhibitedBy":[]}},
 {"labels":{"alertname":"Watchdog","severity":"none"},"status":{"state":"active","silencedBy":[],"inhibitedBy":[]}},
 {"labels":{"alertname":"DiskFull","instance":"web-2:9100","severity":"warning"},"status":{"state":"suppressed","silencedBy":["abc"],"inhibitedBy":[]}}
]`

func TestAlertmanager(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		delay    time.Duration
		check    config.AlertCheck
		passed   bool
		reason   string
		blocking []string
	}{
		{"a matching alert blocks, naming it", 200, amAlerts, 0, config.AlertCheck{Match: []string{`severity="critical"`}},
			false, `1 matching alert(s) firing at URL (alertmanager): NodeDown{instance="web-1:9100",severity="critical"}`, []string{`NodeDown{instance="web-1:9100",severity="critical"}`}},
		{"every alert without matchers", 200, amAlerts, 0, config.AlertCheck{},
			false, `2 matching alert(s) firing at URL (alertmanager): NodeDown{instance="web-1:9100",severity="critical"}, Watchdog{severity="none"}`, nil},
		{"excluded alerts do not block", 200, amAlerts, 0, config.AlertCheck{Exclude: []string{`alertname=~"Watchdog|NodeDown"`}},
			true, "no matching alert firing at URL (alertmanager)", nil},
		{"templated matcher: this node's alerts only", 200, amAlerts, 0, config.AlertCheck{Match: []string{`instance=~"{{.Node}}:.*"`}},
			false, `1 matching alert(s) firing at URL (alertmanager): NodeDown{instance="web-1:9100",severity="critical"}`, nil},
		{"a silenced alert does not block", 200, amAlerts, 0, config.AlertCheck{Match: []string{`alertname="DiskFull"`}},
			true, "no matching alert firing at URL (alertmanager)", nil},
		{"no alerts", 200, `[]`, 0, config.AlertCheck{},
			true, "no matching alert firing at URL (alertmanager)", nil},
		{"non-2xx blocks", 503, `{"message":"overloaded"}`, 0, config.AlertCheck{},
			false, `alerts at URL unknown, so not rebooting: GET /api/v2/alerts: 503 Service Unavailable: {"message":"overloaded"}`, nil},
		{"malformed JSON blocks", 200, `{"alerts":`, 0, config.AlertCheck{},
			false, "alerts at URL unknown, so not rebooting: GET /api/v2/alerts: not Alertmanager's alert list", nil},
		{"a timeout blocks", 200, `[]`, 3 * time.Second, config.AlertCheck{TimeoutSec: 1},
			false, "alerts at URL unknown, so not rebooting: no answer in time (timeout_sec)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, queries := fakeServer(t, tt.status, tt.body, tt.delay)
			tt.check.URL = srv.URL
			c := Checker{Alerts: []config.AlertCheck{tt.check}, Data: matcher.Data{Node: "web-1"}}
			res, err := c.Check(context.Background(), gate.PhasePreLock)
			if err != nil || len(res) != 1 {
				t.Fatalf("Check = %v, %v", res, err)
			}
			r := res[0]
			want := strings.ReplaceAll(tt.reason, "URL", srv.URL)
			if r.Passed != tt.passed || !strings.HasPrefix(r.Reason, want) || r.Name != gate.CheckAlerts || r.URL != srv.URL {
				t.Errorf("got %+v\nwant passed=%v reason %q", r, tt.passed, want)
			}
			if tt.blocking != nil && fmt.Sprint(r.Blocking) != fmt.Sprint(tt.blocking) {
				t.Errorf("blocking %q, want %q", r.Blocking, tt.blocking)
			}
			srv.Close() // waits for a handler still sleeping (the timeout case)
			if q := (*queries)[0]; q != "/api/v2/alerts?active=true&inhibited=false&silenced=false" {
				t.Errorf("asked %s", q)
			}
		})
	}
}

func TestUnreachableAndPasswordMasked(t *testing.T) {
	srv, _ := fakeServer(t, 200, `[]`, 0)
	srv.Close()
	url := strings.Replace(srv.URL, "http://", "http://crd:s3cret@", 1)
	for _, chk := range []Checker{
		{Alerts: []config.AlertCheck{{URL: url}}},
		{Alerts: []config.AlertCheck{{URL: url, Source: config.SourcePrometheus}}},
		{PromQL: []config.PromQLCheck{{URL: url, Expr: "up", NoSeries: true}}},
	} {
		res, err := chk.Check(context.Background(), gate.PhasePreLock)
		if err != nil || len(res) != 1 {
			t.Fatalf("Check = %v, %v", res, err)
		}
		masked := strings.Replace(srv.URL, "http://", "http://crd:***@", 1)
		r := res[0]
		if r.Passed || !strings.Contains(r.Reason, "at "+masked+" unknown, so not rebooting") || !strings.Contains(r.Reason, "connection refused") {
			t.Errorf("reason %q: want blocked, naming %s, connection refused", r.Reason, masked)
		}
		if strings.Contains(r.Reason, "s3cret") || strings.Contains(r.URL, "s3cret") || strings.Contains(r.Reason, "\n") {
			t.Errorf("reason prints the password or spans lines: %q", r.Reason)
		}
	}
}

func TestBasicAuthFromURL(t *testing.T) {
	srv, _ := fakeServer(t, 200, amAlerts, 0)
	good := strings.Replace(srv.URL, "http://", "http://crd:s3cret@", 1)
	bad := strings.Replace(srv.URL, "http://", "http://crd:wrong@", 1)
	c := Checker{Alerts: []config.AlertCheck{{URL: good, Match: []string{`alertname="NodeDown"`}}, {URL: bad}}}
	res, _ := c.Check(context.Background(), gate.PhasePreLock)
	if res[0].Passed || len(res[0].Blocking) != 1 {
		t.Errorf("with credentials: %+v", res[0])
	}
	if res[1].Passed || !strings.Contains(res[1].Reason, "401 Unauthorized") || strings.Contains(res[1].Reason, "wrong") {
		t.Errorf("with bad credentials: %+v", res[1])
	}
}

const promAlerts = `{"status":"success","data":{"alerts":[
 {"labels":{"alertname":"HighLoad","instance":"web-1:9100"},"annotations":{},"state":"firing","activeAt":"2026-01-01T00:00:00Z","value":"5e+00"},
 {"labels":{"alertname":"SlowDisk","instance":"web-1:9100"},"annotations":{},"state":"pending","activeAt":"2026-01-01T00:00:00Z","value":"1e+00"}]}}`

func TestPrometheusAlerts(t *testing.T) {
	srv, queries := fakeServer(t, 200, promAlerts, 0)
	for _, tt := range []struct {
		pending bool
		want    string
	}{
		{false, `1 matching alert(s) firing at URL (prometheus): HighLoad{instance="web-1:9100"}`},
		{true, `2 matching alert(s) firing at URL (prometheus): HighLoad{instance="web-1:9100"}, SlowDisk{instance="web-1:9100"} (pending)`},
	} {
		c := Checker{Alerts: []config.AlertCheck{{URL: srv.URL + "/", Source: config.SourcePrometheus, IncludePending: tt.pending}}}
		res, err := c.Check(context.Background(), gate.PhaseUnderLock)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.ReplaceAll(tt.want, "URL", srv.URL+"/"); res[0].Passed || res[0].Reason != want {
			t.Errorf("include_pending=%v: %q, want %q", tt.pending, res[0].Reason, want)
		}
	}
	if !strings.HasPrefix((*queries)[0], "/api/v1/alerts") {
		t.Errorf("asked %q", *queries)
	}
}

func TestPromQL(t *testing.T) {
	vector := func(vals ...string) string {
		var rs []string
		for i, v := range vals {
			rs = append(rs, fmt.Sprintf(`{"metric":{"instance":"n%d"},"value":[1700000000,"%s"]}`, i+1, v))
		}
		return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(rs, ",") + `]}}`
	}
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name   string
		status int
		body   string
		check  config.PromQLCheck
		passed bool
		reason string
	}{
		{"within bounds", 200, vector("0.5", "0.9"), config.PromQLCheck{Min: f(0), Max: f(1)}, true, "promql at URL: EXPR = 0.5, 0.9, within [0, 1]"},
		{"above max blocks, naming the series", 200, vector("0.5", "2"), config.PromQLCheck{Max: f(1)}, false, `promql at URL: EXPR outside [-Inf, 1]: {instance="n2"} = 2`},
		{"below min blocks", 200, vector("3"), config.PromQLCheck{Min: f(5)}, false, `promql at URL: EXPR outside [5, +Inf]: {instance="n1"} = 3`},
		{"NaN blocks", 200, vector("NaN"), config.PromQLCheck{Max: f(1)}, false, `promql at URL: EXPR outside [-Inf, 1]: {instance="n1"} = NaN`},
		{"no series with bounds blocks", 200, vector(), config.PromQLCheck{Max: f(1)}, false, "promql at URL: EXPR returned no series, so its value is unknown"},
		{"no series wanted", 200, vector(), config.PromQLCheck{NoSeries: true}, true, "promql at URL: EXPR returned no series"},
		{"a series where none is wanted blocks", 200, vector("1"), config.PromQLCheck{NoSeries: true}, false, `promql at URL: EXPR returned 1 series (no_series: true): {instance="n1"} = 1`},
		{"scalar", 200, `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"7"]}}`, config.PromQLCheck{Max: f(5)}, false, "promql at URL: EXPR outside [-Inf, 5]: scalar = 7"},
		{"a PromQL error blocks", 400, `{"status":"error","errorType":"bad_data","error":"parse error: unexpected end of input"}`, config.PromQLCheck{Max: f(1)}, false,
			"promql at URL unknown, so not rebooting: query EXPR: bad_data: parse error: unexpected end of input"},
		{"a string result blocks", 200, `{"status":"success","data":{"resultType":"string","result":[1700000000,"x"]}}`, config.PromQLCheck{Max: f(1)}, false,
			"promql at URL unknown, so not rebooting: query EXPR: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, queries := fakeServer(t, tt.status, tt.body, 0)
			tt.check.URL = srv.URL
			tt.check.Expr = `errors{instance=~"{{.Node}}:.*"}`
			c := Checker{PromQL: []config.PromQLCheck{tt.check}, Data: matcher.Data{Node: "web-1"}, Now: func() time.Time { return time.Unix(1700000000, 0) }}
			res, err := c.Check(context.Background(), gate.PhasePostReboot)
			if err != nil || len(res) != 1 {
				t.Fatalf("Check = %v, %v", res, err)
			}
			want := strings.NewReplacer("URL", srv.URL, "EXPR", `errors{instance=~"web-1:.*"}`).Replace(tt.reason)
			if res[0].Passed != tt.passed || !strings.HasPrefix(res[0].Reason, want) || res[0].Name != gate.CheckPromQL {
				t.Errorf("got %+v\nwant passed=%v reason %q", res[0], tt.passed, want)
			}
			if q := (*queries)[0]; !strings.Contains(q, "query=errors%7Binstance%3D~%22web-1%3A.%2A%22%7D") {
				t.Errorf("asked %s", q)
			}
		})
	}
}

func TestPhasesAndInterrupt(t *testing.T) {
	srv, queries := fakeServer(t, 200, `[]`, 0)
	c := Checker{Alerts: []config.AlertCheck{{URL: srv.URL, Phases: []string{gate.PhasePreLock}}}}
	res, err := c.Check(context.Background(), gate.PhasePostReboot)
	if err != nil || len(res) != 0 || len(*queries) != 0 {
		t.Errorf("a check outside its phases ran: %v %v %q", res, err, *queries)
	}
	slow, _ := fakeServer(t, 200, `[]`, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	c = Checker{Alerts: []config.AlertCheck{{URL: slow.URL}}}
	if _, err := c.Check(ctx, gate.PhasePreLock); exitcode.CodeOf(err) != exitcode.Interrupted {
		t.Errorf("interrupted check: %v, want exit 130", err)
	}
}
