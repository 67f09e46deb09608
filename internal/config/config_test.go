package config

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Interval time.Duration `toml:"interval"`
	Name     string        `toml:"name"`
}

type testConfig struct {
	Listen  string        `toml:"listen"`
	Timeout time.Duration `toml:"timeout"`
	Count   int           `toml:"count"`
	Inner   inner         `toml:"inner"`
	Ptr     *inner        `toml:"ptr"`
}

func TestDecode(t *testing.T) {
	f := func(doc, want string) {
		t.Helper()
		c := testConfig{Listen: "127.0.0.1:1", Timeout: time.Second}
		err := Decode([]byte(doc), &c)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("Decode(%q)\n got %q\nwant %q", doc, got, want)
		}
	}
	f(`timeout = "90s"`+"\n"+`[inner]`+"\n"+`interval = "5m"`, "")
	f(`count = 3`, "")
	f("listen = \n", `line 1 (last key "listen"): expected value but found '\n' instead`)
	f(`listen = 8000`, `line 1 (last key "listen"): incompatible types: TOML value has type int64; destination has type string`)
	f(`lisen = "x"`, `unknown key "lisen"`)
	f("[inner]\nnmae = \"x\"", `unknown key "inner.nmae"`)
	f(`timeout = "5 minutes"`, `line 1 (last key "timeout"): invalid duration: "5 minutes"`)
	f(`timeout = 30`, `timeout: 30 is not a duration; write a string such as "30s"`)
	f("[inner]\ninterval = 7", `inner.interval: 7 is not a duration; write a string such as "7s"`)
	f("[ptr]\ninterval = 8", `ptr.interval: 8 is not a duration; write a string such as "8s"`)
}

func TestCheckListen(t *testing.T) {
	f := func(addr, want string) {
		t.Helper()
		err := CheckListen("listen", addr)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("CheckListen(%q)\n got %q\nwant %q", addr, got, want)
		}
	}
	f("127.0.0.1:8000", "")
	f("[::1]:0", "")
	f("localhost:9464", "")
	f(":9464", "")
	f("8000", `listen: "8000" is not host:port: missing port in address`)
	f("127.0.0.1:http", `listen: port "http" is not a number in 0..65535`)
	f("127.0.0.1:65536", `listen: port "65536" is not a number in 0..65535`)
	f("example.com:80", `listen: host "example.com" is not an IP address or localhost`)
}

func TestOverridesOnlyGivenFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	a := fs.String("a", "default-a", "")
	fs.String("b", "default-b", "")
	if err := fs.Parse([]string{"-a", "x"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	Overrides(fs, map[string]func(){
		"a": func() { got["a"] = *a },
		"b": func() { got["b"] = "overridden" },
	})
	if !reflect.DeepEqual(got, map[string]string{"a": "x"}) {
		t.Errorf("overrides applied: %v", got)
	}
}

// TestEncodeReadsBack: what Encode prints decodes to the same value.
func TestEncodeReadsBack(t *testing.T) {
	c := testConfig{Listen: "0.0.0.0:1", Timeout: 90 * time.Second, Count: 7, Inner: inner{Interval: 1500 * time.Millisecond, Name: `a "b"`}}
	var b strings.Builder
	if err := Encode(&b, c); err != nil {
		t.Fatal(err)
	}
	var back testConfig
	if err := Decode([]byte(b.String()), &back); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if back != c {
		t.Errorf("read back %+v, want %+v from\n%s", back, c, b.String())
	}
	if !strings.Contains(b.String(), `timeout = "1m30s"`) {
		t.Errorf("durations are not written as strings:\n%s", b.String())
	}
}

// FuzzDecode: Decode never panics, whatever the bytes; what it accepts
// encodes and reads back to the same value.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`timeout = "90s"`, "[inner]\ninterval = 7", "[ptr]\nname = \"x\"", `count = 1e3`, "listen = \n", `x = [1, "a"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c testConfig
		if Decode(data, &c) != nil {
			return
		}
		var b strings.Builder
		if err := Encode(&b, c); err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", data, err)
		}
		var back testConfig
		if err := Decode([]byte(b.String()), &back); err != nil {
			t.Fatalf("accepted %q; its encoding %q does not decode: %v", data, b.String(), err)
		}
	})
}
