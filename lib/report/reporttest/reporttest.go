// Package reporttest checks a hand-written report.Appender against
// encoding/json.
package reporttest

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
)

// AgreesWithJSON fills n values of T at random (every exported field, nested
// structs and slices included, so a field added to T but not to its
// AppendJSON shows up) plus T's zero value, and checks that appendJSON writes
// exactly what json.Marshal writes for plain(v), a copy of v in a type
// without methods (type plain T).
func AgreesWithJSON[T any](t *testing.T, n int, appendJSON func(*T, []byte) []byte, plain func(T) any) {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	values := make([]T, n+1) // values[0] stays the zero value
	for i := 1; i <= n; i++ {
		fill(reflect.ValueOf(&values[i]).Elem(), rng)
	}
	for _, v := range values {
		want, err := json.Marshal(plain(v))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSON(&v, nil); string(got) != string(want) {
			t.Fatalf("AppendJSON differs from encoding/json for %+v:\ngot  %s\nwant %s", v, got, want)
		}
	}
}

// strs are the strings fields are filled with: empty (omitempty), plain,
// and those encoding/json escapes.
var strs = []string{"", "", "node-1", `a "quoted" \ path`, "<&>", "line\nbreak\t\x01", "\u2028\u2029", "\xff bad utf-8", "héllo ✓"}

func fill(v reflect.Value, rng *rand.Rand) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(strs[rng.Intn(len(strs))])
	case reflect.Bool:
		v.SetBool(rng.Intn(2) == 1)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(rng.Int63n(2000) - 1000)
	case reflect.Slice:
		n := rng.Intn(5) - 1 // -1: nil
		if n < 0 {
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(s.Index(i), rng)
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), rng)
			}
		}
	default:
		panic("reporttest: cannot fill a " + v.Type().String() + "; extend fill")
	}
}
