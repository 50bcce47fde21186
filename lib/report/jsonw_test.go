package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// AppendString must write what encoding/json writes, byte for byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{
		"", "plain", `quote " backslash \ slash /`, "<script>&amp;</script>", "line\nbreak\r\ttab\b\f",
		"\x00\x01\x1f\x7f", "\u2028\u2029", "héllo wörld ✓ 🚀", "\xff\xfe invalid", "\xed\xa0\x80 surrogate",
		"\xc3", "a\xc3(b", "\U0010FFFF", "\uFFFD",
	} {
		f.Add(s)
	}
	var all strings.Builder
	for c := 0; c < 256; c++ {
		all.WriteByte(byte(c))
	}
	f.Add(all.String())
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, encoding/json: %s", s, got, want)
		}
	})
}

func TestObject(t *testing.T) {
	h := Header{Tool: "t", ExitCode: 7, ExitName: "etcd_unavailable", Node: "n<1>", Error: "e&f"}
	o := Begin(nil)
	h.AppendFields(&o)
	o.Strings("nil", nil)
	o.Strings("empty", []string{})
	o.StringsOmit("omitted", []string{})
	o.StringOmit("omitted_too", "")
	o.Raw("raw", func(b []byte) []byte { return append(b, "[1]"...) })
	got := string(o.End())
	want := `{"tool":"t","exit_code":7,"exit_name":"etcd_unavailable","node":"n\u003c1\u003e","error":"e\u0026f","nil":null,"empty":[],"raw":[1]}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(got), &v); err != nil {
		t.Errorf("not JSON: %v", err)
	}
}
