package silence

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Basic auth from user:password@ in the URL, the path prefix kept, and the
// password in no error.
func TestClientAuthPrefixAndMasking(t *testing.T) {
	var gotUser, gotPass, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUser, gotPass, _ = r.BasicAuth()
		gotPath = r.URL.Path
		if r.Method == http.MethodPost {
			_, _ = w.Write([]byte(`{"silenceID":"abc"}`))
			return
		}
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1) + "/am/"
	c := Client{URL: u, Timeout: 5 * time.Second}
	id, err := c.Create(context.Background(), Silence{})
	if err != nil || id != "abc" || gotUser != "ops" || gotPass != "s3cret" || gotPath != "/am/api/v2/silences" {
		t.Fatalf("Create = %q, %v; auth %q:%q path %s", id, err, gotUser, gotPass, gotPath)
	}
	for _, tc := range []struct {
		name string
		c    Client
		want string
	}{
		{"HTTP error", c, "HTTP 500: boom"},
		{"refused", Client{URL: "http://ops:s3cret@" + closedAddr(t), Timeout: time.Second}, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Get(context.Background(), "x")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ops:***@") || strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("err = %v; want %q, the URL named with its password masked", err, tc.want)
			}
		})
	}
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
