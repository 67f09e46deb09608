package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/bench.golden")

// TestTable feeds the table a sample of make bench's output (go test
// -bench -v: headers, other packages' benchmarks, name-only lines, logs)
// and compares it with testdata/bench.golden, whose medians were worked
// by hand: odd and even sample counts, missing cells, a negative
// MiB_over_file+kv.
func TestTable(t *testing.T) {
	in, err := os.ReadFile("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := parse(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tb.write(&out); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/bench.golden", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/bench.golden")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("table:\n%s\nwant (testdata/bench.golden):\n%s", out.String(), want)
	}
}

// TestTableColumns: columns follow the thread counts and batch sizes
// present (PICOMETER_BENCH_THREADS=1,4), sorted, and a run without
// GOMAXPROCS suffix (-cpu 1) parses the same.
func TestTableColumns(t *testing.T) {
	in := `BenchmarkTypes/model=m/threads=4/prefill=64 	 1	 1 ns/op	 10 tok/s
BenchmarkTypes/model=m/threads=4/decode/batch=2 	 1	 1 ns/op	 20 tok/s
BenchmarkTypes/model=m/threads=1/decode/batch=2 	 1	 1 ns/op	 30 tok/s
BenchmarkTypes/model=m/threads=1/decode/batch=1 	 1	 1 ns/op	 40 tok/s
`
	tb, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tb.write(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if got, want := strings.Fields(lines[1]), strings.Fields("model b1 t1 b2 t1 b2 t4 pp64 t4 rss over file+kv"); !equal(got, want) {
		t.Errorf("header %q, want %q", got, want)
	}
	if got, want := strings.Fields(lines[2]), strings.Fields("m 40.0 30.0 20.0 10.0 - -"); !equal(got, want) {
		t.Errorf("row %q, want %q", got, want)
	}
	if !strings.Contains(lines[0], "medians of 1 runs") {
		t.Errorf("title %q does not say 1 run", lines[0])
	}
}

func equal(a, b []string) bool {
	return strings.Join(a, "|") == strings.Join(b, "|")
}

func TestParseErrors(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		_, err := parse(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parse(%q): %v, want an error containing %q", in, err, want)
		}
	}
	f("goos: linux\nBenchmarkDecode/batch=1-2 1 1 ns/op 5 tok/s\nPASS\n", "no BenchmarkTypes results")
	f("BenchmarkTypes/model=m/threads=1/decode/batch=1-2 1 1 ns/op x tok/s\n", `line 1: "x" is not a number`)
	f("BenchmarkTypes/model=m/threads=1/decode/batch=1-2 1 1 ns/op 3 bw_fraction\n", "no tok/s")
	f("BenchmarkTypes/model=m/rss-2 1 1 ns/op 3 rss_MiB\n", "no rss_MiB and MiB_over_file+kv")
	f("BenchmarkTypes/model=m/threads=x/decode/batch=1-2 1 1 ns/op 3 tok/s\n", "want threads=T/decode/batch=N")
	f("BenchmarkTypes/model=m/threads=1/batch=1-2 1 1 ns/op 3 tok/s\n", "want threads=T/decode/batch=N")
	f("BenchmarkTypes/m/threads=1/decode/batch=1-2 1 1 ns/op 3 tok/s\n", "no model= element")
	if _, err := parse(strings.NewReader("")); !errors.Is(err, errNoResults) {
		t.Errorf("empty input: %v, want errNoResults", err)
	}
}

// TestConstrainedParseErrors: the constrained table's parser names the line
// and what is wrong, and skips other benchmarks and -v lines.
func TestConstrainedParseErrors(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		_, err := parseConstrained(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseConstrained(%q): %v, want an error containing %q", in, err, want)
		}
	}
	const name = "BenchmarkConstrained/model=m/threads=1/decode/batch=4/constraint=none-2"
	f(name+" 1 1 ns/op x tok/s\n", `line 1: "x" is not a number`)
	f("PASS\n"+name+" 1 1 ns/op 3 mask_us\n", "line 2: "+name+": no tok/s")
	f("BenchmarkConstrained/model=m/threads=1/batch=4/constraint=none-2 1 1 ns/op 3 tok/s\n", "want BenchmarkConstrained/model=M")
	f("BenchmarkConstrained/model=m/threads=x/decode/batch=4/constraint=none-2 1 1 ns/op 3 tok/s\n", "want BenchmarkConstrained/model=M")
	f("BenchmarkConstrained/model=m/threads=1/decode/batch=4/constraint=-2 1 1 ns/op 3 tok/s\n", "want BenchmarkConstrained/model=M")
	tb, err := parseConstrained(strings.NewReader("=== RUN   " + name + "\n" + name + "\n" +
		"BenchmarkTypes/model=m/threads=1/decode/batch=1-2 1 1 ns/op 3 tok/s\n" + name + " 1 1 ns/op 3 tok/s\n"))
	if err != nil || len(tb.rows) != 1 || len(tb.rows[0].samples["none"]) != 1 {
		t.Errorf("one result among other lines: %+v, %v", tb, err)
	}
}

func TestMedian(t *testing.T) {
	f := func(want string, xs ...float64) {
		t.Helper()
		if got := cell(xs); got != want {
			t.Errorf("cell(%v) = %s, want %s", xs, got, want)
		}
	}
	f("-")
	f("5.0", 5)
	f("2.5", 3, 2)
	f("2.0", 3, 1, 2)
	f("250", 100, 400, 200, 300)
	f("99.5", 99.5)
	f("-3.0", -3, -5, 10)
}

// TestConstrainedTable: BenchmarkConstrained's rows, compared with
// testdata/constrained.golden, whose medians were worked by hand: m-q4_0
// b1 none (56.94, 56.06) → 56.5, schema (52, 54) → 53, ratio 0.938, mask
// (20.5, 21.5) → 21.0 µs, share (0.04, 0.06) → 5.0%; b8 none (88.75,
// 88.02) → 88.385 → 88.4, schema (80, 70, 75) → 75, ratio 0.849, mask 35
// µs, share 12.0%; two_schemas b1 (50, 48) → 49, ratio 49/56.5 = 0.867,
// mask (30, 34) → 32 (apart from json_schema's); b8 60, ratio 0.679, mask
// 50; n's schema sides skipped: dashes.
func TestConstrainedTable(t *testing.T) {
	in, err := os.ReadFile("testdata/constrained.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeAll(&out, in); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/constrained.golden", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/constrained.golden")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("table:\n%s\nwant (testdata/constrained.golden):\n%s", out.String(), want)
	}
}

// TestWriteAllBoth: with both benchmarks' results, both tables, the
// per-type one first; with neither, an error naming both.
func TestWriteAllBoth(t *testing.T) {
	types, err := os.ReadFile("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	cons, err := os.ReadFile("testdata/constrained.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeAll(&out, append(append([]byte{}, types...), cons...)); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	i, j := strings.Index(s, "BenchmarkTypes:"), strings.Index(s, "\n\nBenchmarkConstrained:")
	if i != 0 || j < 0 {
		t.Errorf("want the per-type table, a blank line, the constrained table:\n%s", s)
	}
	err = writeAll(&out, []byte("PASS\n"))
	if err == nil || err.Error() != "no BenchmarkTypes or BenchmarkConstrained results" {
		t.Errorf("no results: %v", err)
	}
}
