// Command benchtable prints the engine's per-type benchmark
// (BenchmarkTypes, native/types_bench_test.go) from `go test -bench`
// output as one row per model: tokens/s of decode at each batch size and
// of prefill at each prompt length, at each thread count, then the
// resident memory after load (pmbench -mode rss) and how far it is above
// the file plus the KV cache. Every cell is the median of the runs in the
// input (for an even number, the mean of the middle two, as benchstat
// computes it). Rows keep the order the models first appear in; columns
// are decode batches, then prefill lengths, ascending, each at every
// thread count present, ascending. A missing result is "-".
//
// Then BenchmarkConstrained's table (constrained.go): decode tokens/s
// without and with a JSON schema side by side, their ratio and the
// grammar mask's cost. Either table is left out when its benchmark has no
// result; the input must hold one of them.
//
//	go run ./tools/benchtable build/bench.txt
//
// make bench (scripts/bench.sh) runs it after benchstat.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtable BENCH_OUTPUT (go test -bench output, e.g. build/bench.txt)")
		os.Exit(2)
	}
	in, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	if err := writeAll(os.Stdout, in); err != nil {
		fmt.Fprintf(os.Stderr, "benchtable: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// errNoResults is parse's error for input without a BenchmarkTypes result.
var errNoResults = errors.New("no BenchmarkTypes results")

// writeAll writes the tables of the results in, a blank line between
// them; an error when there are none.
func writeAll(w io.Writer, in []byte) error {
	t, err := parse(bytes.NewReader(in))
	if err != nil && !errors.Is(err, errNoResults) {
		return err
	}
	ct, cerr := parseConstrained(bytes.NewReader(in))
	if cerr != nil {
		return cerr
	}
	if t == nil && len(ct.rows) == 0 {
		return errors.New("no BenchmarkTypes or BenchmarkConstrained results")
	}
	if t != nil {
		if err := t.write(w); err != nil {
			return err
		}
	}
	if len(ct.rows) > 0 {
		if t != nil {
			io.WriteString(w, "\n")
		}
		return ct.write(w)
	}
	return nil
}

// column is one throughput column: decode at batch n, or prefill of n
// tokens, at a thread count.
type column struct {
	prefill bool
	n       int
	threads int
}

func (c column) String() string {
	if c.prefill {
		return fmt.Sprintf("pp%d t%d", c.n, c.threads)
	}
	return fmt.Sprintf("b%d t%d", c.n, c.threads)
}

func (c column) less(d column) int {
	switch {
	case c.prefill != d.prefill:
		if c.prefill {
			return 1
		}
		return -1
	case c.n != d.n:
		return c.n - d.n
	}
	return c.threads - d.threads
}

// row holds one model's samples.
type row struct {
	model string
	tok   map[column][]float64 // tok/s samples
	rss   []float64            // rss_MiB samples
	over  []float64            // MiB_over_file+kv samples
}

// table is BenchmarkTypes' results by model.
type table struct {
	rows []*row
	cols []column
}

// procs is the -GOMAXPROCS suffix go test appends to a benchmark's name.
var procs = regexp.MustCompile(`-[0-9]+$`)

// parse reads go test -bench output and keeps the BenchmarkTypes results.
// Other lines (headers, other benchmarks, -v logs, PASS/FAIL) are ignored.
func parse(r io.Reader) (*table, error) {
	t := &table{}
	byModel := map[string]*row{}
	seen := map[column]bool{}
	err := eachResult(r, "BenchmarkTypes", func(res result) error {
		model, ok := strings.CutPrefix(res.name[1], "model=")
		if !ok {
			return res.errorf("no model= element")
		}
		rw := byModel[model]
		if rw == nil {
			rw = &row{model: model, tok: map[column][]float64{}}
			byModel[model] = rw
			t.rows = append(t.rows, rw)
		}
		c, isTok, err := parseName(res.name[2:])
		if err != nil {
			return res.errorf("%v", err)
		}
		if !isTok {
			rss, ok1 := res.metrics["rss_MiB"]
			over, ok2 := res.metrics["MiB_over_file+kv"]
			if !ok1 || !ok2 {
				return res.errorf("no rss_MiB and MiB_over_file+kv")
			}
			rw.rss, rw.over = append(rw.rss, rss), append(rw.over, over)
			return nil
		}
		v, ok := res.metrics["tok/s"]
		if !ok {
			return res.errorf("no tok/s")
		}
		rw.tok[c] = append(rw.tok[c], v)
		if !seen[c] {
			seen[c] = true
			t.cols = append(t.cols, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.rows) == 0 {
		return nil, errNoResults
	}
	slices.SortFunc(t.cols, column.less)
	return t, nil
}

// parseName reads the elements after model=: "threads=T/decode/batch=N",
// "threads=T/prefill=N" (isTok) or "rss".
func parseName(el []string) (c column, isTok bool, err error) {
	if len(el) == 1 && el[0] == "rss" {
		return c, false, nil
	}
	bad := fmt.Errorf("want threads=T/decode/batch=N, threads=T/prefill=N or rss")
	if len(el) < 2 {
		return c, false, bad
	}
	ts, ok := strings.CutPrefix(el[0], "threads=")
	if !ok {
		return c, false, bad
	}
	if c.threads, err = strconv.Atoi(ts); err != nil {
		return c, false, bad
	}
	var ns string
	switch {
	case len(el) == 3 && el[1] == "decode" && strings.HasPrefix(el[2], "batch="):
		ns = el[2][len("batch="):]
	case len(el) == 2 && strings.HasPrefix(el[1], "prefill="):
		c.prefill, ns = true, el[1][len("prefill="):]
	default:
		return c, false, bad
	}
	if c.n, err = strconv.Atoi(ns); err != nil {
		return c, false, bad
	}
	return c, true, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count) and false for no samples.
func median(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	s := slices.Sorted(slices.Values(xs))
	m := len(s) / 2
	if len(s)%2 == 0 {
		return (s[m-1] + s[m]) / 2, true
	}
	return s[m], true
}

// cell formats the median of xs: whole numbers from 100 up, one decimal
// below, "-" without samples.
func cell(xs []float64) string {
	m, ok := median(xs)
	switch {
	case !ok:
		return "-"
	case m >= 100:
		return strconv.FormatFloat(m, 'f', 0, 64)
	}
	return strconv.FormatFloat(m, 'f', 1, 64)
}

// runs returns the fewest and most samples of any cell.
func (t *table) runs() (lo, hi int) {
	lo = -1
	add := func(n int) {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	for _, r := range t.rows {
		for _, c := range t.cols {
			if n := len(r.tok[c]); n > 0 {
				add(n)
			}
		}
		if len(r.rss) > 0 {
			add(len(r.rss))
		}
	}
	return max(lo, 0), hi
}

// write prints the table, aligned, under a line saying what it holds.
func (t *table) write(w io.Writer) error {
	lo, hi := t.runs()
	n := strconv.Itoa(lo)
	if lo != hi {
		n = fmt.Sprintf("%d-%d", lo, hi)
	}
	fmt.Fprintf(w, "BenchmarkTypes: tokens/s (bN: decode at batch N; ppN: prefill of N tokens; tT: T threads) and RSS after load, MiB; medians of %s runs\n", n)
	lines := [][]string{{"model"}}
	for _, c := range t.cols {
		lines[0] = append(lines[0], c.String())
	}
	lines[0] = append(lines[0], "rss", "over file+kv")
	for _, r := range t.rows {
		l := []string{r.model}
		for _, c := range t.cols {
			l = append(l, cell(r.tok[c]))
		}
		lines = append(lines, append(l, cell(r.rss), cell(r.over)))
	}
	width := make([]int, len(lines[0]))
	for _, l := range lines {
		for i, s := range l {
			width[i] = max(width[i], len(s))
		}
	}
	// The model column reads left-aligned, the numbers right-aligned.
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%-*s", width[0], l[0])
		for i, s := range l[1:] {
			fmt.Fprintf(&b, "  %*s", width[i+1], s)
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
