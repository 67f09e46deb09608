package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseAndMedians(t *testing.T) {
	in := `goos: linux
pkg: github.com/picometer/picometer/schema
BenchmarkDecodeRequest-2   	  849631	      1196 ns/op	 807.50 MB/s	      56 B/op	       5 allocs/op
BenchmarkDecodeRequest-2   	  849631	      1000 ns/op	 900.00 MB/s	      56 B/op	       5 allocs/op
BenchmarkDecodeRequest-2   	  849631	      3000 ns/op	 100.00 MB/s	      56 B/op	       5 allocs/op
pkg: github.com/picometer/picometer/native
BenchmarkDecode/batch=8-2 	 10	 100 ns/op	 1234.5 tok/s
BenchmarkDecode/batch=8-2 	 10	 300 ns/op	 1000.5 tok/s
not a bench line
PASS
`
	rows, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	if r := rows[0]; r.runs != 3 || median(r.metrics["ns/op"]) != 1196 || median(r.metrics["MB/s"]) != 807.5 {
		t.Fatalf("row 0: %+v", r)
	}
	if r := rows[1]; r.name != "BenchmarkDecode/batch=8" || median(r.metrics["tok/s"]) != 1117.5 {
		t.Fatalf("row 1: %+v", r)
	}
	var b bytes.Buffer
	write(&b, rows)
	if !strings.Contains(b.String(), "native   BenchmarkDecode/batch=8  2     200 ns/op  1118 tok/s") {
		t.Fatalf("table:\n%s", b.String())
	}
}
