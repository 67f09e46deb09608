package sidecar

import (
	"io"
	"strconv"
	"strings"

	"github.com/picometer/picometer/schema"
)

// This file is /metrics in OpenMetrics 1.0 (issue 28's exemplars): the
// 0.0.4 text's series, line for line, with three differences the format
// requires. A counter family's metadata names it without "_total" (its
// samples keep it); HELP escapes '"' too; "# EOF" ends the exposition. The
// request histograms' "_bucket" lines carry their exemplars (exemplars.go).
//
// It is written only for a scraper that prefers it in its Accept header
// (negotiate). Prometheus does by default (its scrape_protocols list
// OpenMetrics first) and stores the exemplars with
// --enable-feature=exemplar-storage; VictoriaMetrics' scraper asks for
// text/plain 0.0.4 and gets the 0.0.4 text, unchanged byte for byte, as do
// curl and anything else that does not name OpenMetrics.
// openmetrics_test.go covers it, and TestLiveExemplars with Prometheus.

// omExposer is a series that writes itself differently in OpenMetrics.
type omExposer interface {
	appendOM(b []byte) []byte
}

// omHeader is family f's OpenMetrics metadata.
func omHeader(f *schema.Family) string {
	name := f.PromName()
	if f.Kind == schema.KindCounter {
		name = strings.TrimSuffix(name, "_total")
	}
	help := strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(f.Help)
	return "# HELP " + name + " " + help + "\n# TYPE " + name + " " + f.Kind.PromType() + "\n"
}

// WriteOpenMetrics writes every family that has series, in schema order,
// as OpenMetrics 1.0.
func (r *registry) WriteOpenMetrics(w io.Writer) {
	runAs(w, true, r.write)
}

// negotiate picks /metrics' format from an Accept header: OpenMetrics (with
// the Content-Type to answer) when an application/openmetrics-text range
// of version 1.0.0 or 0.0.1 (or none) has the highest q of the ranges this
// server can serve, the earliest winning a tie; else the 0.0.4 text.
func negotiate(accept string) (contentType string, om bool) {
	bestQ, bestOM, version := -1.0, false, ""
	for _, rng := range strings.Split(accept, ",") {
		params := strings.Split(rng, ";")
		mt := strings.ToLower(strings.TrimSpace(params[0]))
		q, v := 1.0, ""
		for _, p := range params[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "q":
				if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			case "version":
				v = strings.TrimSpace(val)
			}
		}
		isOM := false
		switch mt {
		case "application/openmetrics-text":
			if v != "" && v != "1.0.0" && v != "0.0.1" {
				continue
			}
			isOM = true
		case "text/plain":
			if v != "" && v != "0.0.4" {
				continue
			}
		case "*/*", "text/*":
		default:
			continue
		}
		if q > bestQ {
			bestQ, bestOM, version = q, isOM, v
		}
	}
	if !bestOM || bestQ <= 0 {
		return ContentType, false
	}
	if version == "" {
		version = "1.0.0"
	}
	return "application/openmetrics-text; version=" + version + "; charset=utf-8", true
}
