package report

import (
	"strconv"
	"unicode/utf8"
)

// Appender is a result that writes its own JSON. Write uses it instead of
// encoding/json: for crd-detect and crd-window, whose whole run is a few
// milliseconds, encoding/json's first use (reflecting over each type,
// building and caching its encoders) was about 3 % of the time from start
// to exit (docs/performance.md). An Appender must write exactly what
// json.Marshal writes for the same value; each one has a test comparing the
// two on random values.
type Appender interface {
	AppendJSON(b []byte) []byte
}

// Object writes one JSON object field by field, in the order of the calls.
// Start it with Begin and end it with End.
type Object struct {
	B     []byte
	comma bool
}

// Begin starts an object after b.
func Begin(b []byte) Object { return Object{B: append(b, '{')} }

// End closes the object and returns the bytes.
func (o *Object) End() []byte { return append(o.B, '}') }

func (o *Object) key(k string) {
	if o.comma {
		o.B = append(o.B, ',')
	}
	o.comma = true
	o.B = AppendString(o.B, k)
	o.B = append(o.B, ':')
}

// String writes "k":"v".
func (o *Object) String(k, v string) {
	o.key(k)
	o.B = AppendString(o.B, v)
}

// StringOmit writes "k":"v" unless v is empty (`json:",omitempty"`).
func (o *Object) StringOmit(k, v string) {
	if v != "" {
		o.String(k, v)
	}
}

// Int writes "k":v.
func (o *Object) Int(k string, v int64) {
	o.key(k)
	o.B = strconv.AppendInt(o.B, v, 10)
}

// Bool writes "k":true or "k":false.
func (o *Object) Bool(k string, v bool) {
	o.key(k)
	o.B = strconv.AppendBool(o.B, v)
}

// Strings writes "k":["a",…]; a nil slice is null, as encoding/json writes it.
func (o *Object) Strings(k string, v []string) {
	o.key(k)
	o.B = AppendStrings(o.B, v)
}

// StringsOmit writes "k":[…] unless v is empty (`json:",omitempty"`).
func (o *Object) StringsOmit(k string, v []string) {
	if len(v) > 0 {
		o.Strings(k, v)
	}
}

// Raw writes "k": then whatever f appends (a nested value).
func (o *Object) Raw(k string, f func([]byte) []byte) {
	o.key(k)
	o.B = f(o.B)
}

// AppendFields writes the header's fields, in its struct order.
func (h *Header) AppendFields(o *Object) {
	o.String("tool", h.Tool)
	o.Int("exit_code", int64(h.ExitCode))
	o.String("exit_name", h.ExitName)
	o.String("node", h.Node)
	o.StringOmit("error", h.Error)
}

// AppendStrings appends a JSON array of strings (null for nil).
func AppendStrings(b []byte, v []string) []byte { return AppendSlice(b, v, AppendString) }

// AppendSlice appends a JSON array whose elements each appends (null for a
// nil slice, as encoding/json writes it).
func AppendSlice[T any](b []byte, v []T, each func([]byte, T) []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, e := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = each(b, e)
	}
	return append(b, ']')
}

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string exactly as encoding/json writes
// it: HTML-safe (<, > and & as \u003c, \u003e, \u0026), U+2028 and U+2029
// escaped, invalid UTF-8 replaced by U+FFFD, control characters as \b, \f,
// \n, \r, \t or \u00XX.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
