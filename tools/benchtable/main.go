// Command benchtable reads `go test -bench` output on stdin and prints one
// row per benchmark with the median of every reported metric over its runs
// (-count), so noisy shared machines are summarised by medians, not means.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

type row struct {
	pkg, name string
	runs      int
	metrics   map[string][]float64
	order     []string
}

func main() {
	rows, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	write(os.Stdout, rows)
}

// parse collects the benchmark lines of go test output, by package.
func parse(r io.Reader) ([]*row, error) {
	var rows []*row
	index := map[string]*row{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || (len(f)-2)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		key := pkg + " " + name
		rw := index[key]
		if rw == nil {
			rw = &row{pkg: pkg, name: name, metrics: map[string][]float64{}}
			index[key] = rw
			rows = append(rows, rw)
		}
		rw.runs++
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			unit := f[i+1]
			if _, seen := rw.metrics[unit]; !seen {
				rw.order = append(rw.order, unit)
			}
			rw.metrics[unit] = append(rw.metrics[unit], v)
		}
	}
	return rows, sc.Err()
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func write(w io.Writer, rows []*row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tbenchmark\truns\tmedians")
	for _, r := range rows {
		var parts []string
		for _, u := range r.order {
			parts = append(parts, format(median(r.metrics[u]))+" "+u)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", strings.TrimPrefix(r.pkg, "github.com/picometer/picometer/"), r.name, r.runs, strings.Join(parts, "  "))
	}
	tw.Flush()
}

func format(v float64) string {
	switch {
	case v == float64(int64(v)) && v < 1e15:
		return strconv.FormatInt(int64(v), 10)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}
