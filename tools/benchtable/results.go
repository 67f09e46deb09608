package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// result is one line of go test -bench output: the benchmark's name split
// at "/" (the -GOMAXPROCS suffix dropped) and its metrics by unit.
type result struct {
	line    int
	full    string
	name    []string
	metrics map[string]float64
}

// eachResult calls fn for every result line of the benchmark named bench
// ("BenchmarkTypes"). Other lines (headers, other benchmarks, -v lines
// naming a benchmark, PASS/FAIL) are skipped; a value that is not a number
// is an error naming its line, and so is any error fn returns.
func eachResult(r io.Reader, bench string, fn func(res result) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], bench+"/") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a -v line naming the benchmark, not a result
		}
		res := result{line: line, full: f[0], name: strings.Split(procs.ReplaceAllString(f[0], ""), "/"),
			metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return fmt.Errorf("line %d: %q is not a number", line, f[i])
			}
			res.metrics[f[i+1]] = v
		}
		if err := fn(res); err != nil {
			return err
		}
	}
	return sc.Err()
}

// errorf is an error naming the result's line and benchmark.
func (res result) errorf(format string, a ...any) error {
	return fmt.Errorf("line %d: %s: %s", res.line, res.full, fmt.Sprintf(format, a...))
}
