package report

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

type finishResult struct {
	Header
	Answer string `json:"answer"`
}

func (r *finishResult) Text(w io.Writer) error {
	Line(w, "answer", r.Answer)
	return nil
}

// commandFailed adjusts the header after Settle, as crd-lock hold does.
type commandFailed struct{ finishResult }

func (r *commandFailed) Settle(err error) {
	r.Header.Settle(err)
	r.ExitName = "command_failed"
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestFinish(t *testing.T) {
	for _, tc := range []struct {
		name     string
		w        io.Writer
		format   Format
		res      Settler
		err      error
		wantOut  string
		wantCode exitcode.Code
		wantMsg  string
	}{
		{"ok, JSON", nil, JSON, &finishResult{Header: Header{Tool: "t"}, Answer: "yes"}, nil,
			`{"tool":"t","exit_code":0,"exit_name":"ok","node":"","answer":"yes"}` + "\n", exitcode.OK, ""},
		{"error settles the header and is returned", nil, JSON, &finishResult{Header: Header{Tool: "t"}}, exitcode.Errorf(exitcode.Config, "bad"),
			`{"tool":"t","exit_code":2,"exit_name":"config","node":"","error":"bad","answer":""}` + "\n", exitcode.Config, "bad"},
		{"text through the Texter", nil, Text, &finishResult{Answer: "yes"}, nil, "yes\n", exitcode.OK, ""},
		{"an overriding Settle is used", nil, JSON, &commandFailed{}, exitcode.Errorf(9, "x"), `"exit_name":"command_failed"`, 9, "x"},
		{"a failed write of a success is exit 70", failingWriter{}, JSON, &finishResult{}, nil, "", exitcode.Internal, "write result: broken pipe"},
		{"a failed write keeps the run's own error", failingWriter{}, JSON, &finishResult{}, exitcode.Errorf(exitcode.Config, "bad"), "", exitcode.Config, "bad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			w := tc.w
			if w == nil {
				w = &out
			}
			err := Finish(w, tc.format, tc.res, tc.err)
			if got := exitcode.CodeOf(err); got != tc.wantCode {
				t.Errorf("code %d, want %d (%v)", got, tc.wantCode, err)
			}
			if tc.wantMsg != "" && (err == nil || err.Error() != tc.wantMsg) {
				t.Errorf("error %v, want %q", err, tc.wantMsg)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("wrote %q, want %q in it", out.String(), tc.wantOut)
			}
		})
	}
}
