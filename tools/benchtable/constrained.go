package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// This file tabulates BenchmarkConstrained (daemon/constrained_bench_test.go):
// one row per model, batch size and thread count, with decode tokens/s
// without a constraint and with a JSON schema side by side, their ratio
// (of the medians), and the schema side's grammar mask: the mean time of
// one token's mask (mask_us) and mask time as a share of step time
// (mask_share), each the median of the runs. When the results have the
// two_schemas side (requests alternating between two schemas), its
// tokens/s, ratio to none and mask time follow.

// cKey is one row of the constrained table.
type cKey struct {
	model   string
	batch   int
	threads int
}

// cRow holds one row's samples by metric: "none", "json_schema" and
// "two_schemas" (tok/s of each side), and each constrained side's
// "SIDE mask_us" and "SIDE mask_share".
type cRow struct {
	key     cKey
	samples map[string][]float64
}

// ctable is BenchmarkConstrained's results in the order rows first appear.
type ctable struct{ rows []*cRow }

// parseConstrained reads go test -bench output and keeps the
// BenchmarkConstrained results (an empty table when there are none).
// Names are model=M/threads=T/decode/batch=N/constraint=C.
func parseConstrained(r io.Reader) (*ctable, error) {
	t := &ctable{}
	byKey := map[cKey]*cRow{}
	err := eachResult(r, "BenchmarkConstrained", func(res result) error {
		el := res.name
		bad := res.errorf("want BenchmarkConstrained/model=M/threads=T/decode/batch=N/constraint=C")
		if len(el) != 6 || el[3] != "decode" {
			return bad
		}
		var k cKey
		var kind string
		var ok1, ok2, ok3, ok4 bool
		var ts, ns string
		k.model, ok1 = strings.CutPrefix(el[1], "model=")
		ts, ok2 = strings.CutPrefix(el[2], "threads=")
		ns, ok3 = strings.CutPrefix(el[4], "batch=")
		kind, ok4 = strings.CutPrefix(el[5], "constraint=")
		var err1, err2 error
		k.threads, err1 = strconv.Atoi(ts)
		k.batch, err2 = strconv.Atoi(ns)
		if !ok1 || !ok2 || !ok3 || !ok4 || err1 != nil || err2 != nil || kind == "" {
			return bad
		}
		tok, ok := res.metrics["tok/s"]
		if !ok {
			return res.errorf("no tok/s")
		}
		rw := byKey[k]
		if rw == nil {
			rw = &cRow{key: k, samples: map[string][]float64{}}
			byKey[k] = rw
			t.rows = append(t.rows, rw)
		}
		rw.samples[kind] = append(rw.samples[kind], tok)
		if kind != "none" {
			for _, m := range []string{"mask_us", "mask_share"} {
				if v, ok := res.metrics[m]; ok {
					rw.samples[kind+" "+m] = append(rw.samples[kind+" "+m], v)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.sortRows()
	return t, nil
}

// write prints the table, aligned, under a line saying what it holds.
func (t *ctable) write(w io.Writer) error {
	lo, hi := -1, 0
	two := false
	for _, r := range t.rows {
		for _, k := range []string{"none", "json_schema", "two_schemas"} {
			if n := len(r.samples[k]); n > 0 {
				if lo < 0 || n < lo {
					lo = n
				}
				hi = max(hi, n)
			}
		}
		two = two || len(r.samples["two_schemas"]) > 0
	}
	n := strconv.Itoa(max(lo, 0))
	if lo != hi {
		n = fmt.Sprintf("%d-%d", max(lo, 0), hi)
	}
	what := ""
	head := []string{"model", "batch", "threads", "none", "json_schema", "ratio", "mask µs", "mask share"}
	if two {
		what = "; then requests alternating between two schemas (two_schemas), their ratio to none and their mask µs"
		head = append(head, "two_schemas", "ratio", "mask µs")
	}
	fmt.Fprintf(w, "BenchmarkConstrained: decode tokens/s without a constraint and with a JSON schema, their ratio, and the schema's grammar mask (mean µs per token, share of step time)%s; medians of %s runs\n", what, n)
	lines := [][]string{head}
	for _, r := range t.rows {
		ratio := func(kind string) string {
			a, ok1 := median(r.samples["none"])
			b, ok2 := median(r.samples[kind])
			if ok1 && ok2 && a > 0 {
				return strconv.FormatFloat(b/a, 'f', 3, 64)
			}
			return "-"
		}
		share := "-"
		if m, ok := median(r.samples["json_schema mask_share"]); ok {
			share = strconv.FormatFloat(100*m, 'f', 1, 64) + "%"
		}
		l := []string{r.key.model, strconv.Itoa(r.key.batch), strconv.Itoa(r.key.threads),
			cell(r.samples["none"]), cell(r.samples["json_schema"]), ratio("json_schema"),
			cell(r.samples["json_schema mask_us"]), share}
		if two {
			l = append(l, cell(r.samples["two_schemas"]), ratio("two_schemas"), cell(r.samples["two_schemas mask_us"]))
		}
		lines = append(lines, l)
	}
	width := make([]int, len(lines[0]))
	for _, l := range lines {
		for i, s := range l {
			width[i] = max(width[i], len([]rune(s)))
		}
	}
	var sb strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&sb, "%s%s", l[0], strings.Repeat(" ", width[0]-len([]rune(l[0]))))
		for i, s := range l[1:] {
			sb.WriteString("  " + strings.Repeat(" ", width[i+1]-len([]rune(s))) + s)
		}
		sb.WriteByte('\n')
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// sortRows orders rows by model (first appearance kept), then batch and
// threads ascending.
func (t *ctable) sortRows() {
	first := map[string]int{}
	for i, r := range t.rows {
		if _, ok := first[r.key.model]; !ok {
			first[r.key.model] = i
		}
	}
	slices.SortStableFunc(t.rows, func(a, b *cRow) int {
		switch {
		case a.key.model != b.key.model:
			return first[a.key.model] - first[b.key.model]
		case a.key.batch != b.key.batch:
			return a.key.batch - b.key.batch
		}
		return a.key.threads - b.key.threads
	})
}
