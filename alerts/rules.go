package alerts

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// KV is one label or annotation, kept in declaration order so the rendered
// file is stable and reads in a sensible order.
type KV struct {
	Key, Value string
}

// Rule is one Prometheus recording rule (Record set) or alerting rule
// (Alert set).
type Rule struct {
	Record string
	Alert  string
	Expr   string
	// For is the alert's pending duration.
	For time.Duration
	// Labels are added to the rule's output (severity for alerts).
	Labels []KV
	// Annotations of an alert: summary, description, runbook_url.
	Annotations []KV
}

// Name returns the rule's record or alert name.
func (r *Rule) Name() string {
	if r.Alert != "" {
		return r.Alert
	}
	return r.Record
}

// Label returns the value of the rule's label key, or "".
func (r *Rule) Label(key string) string { return lookupKV(r.Labels, key) }

// Annotation returns the value of the alert's annotation key, or "".
func (r *Rule) Annotation(key string) string { return lookupKV(r.Annotations, key) }

func lookupKV(kvs []KV, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return ""
}

// Group is a Prometheus rule group.
type Group struct {
	Name  string
	Rules []Rule
}

// Groups returns every recording and alerting rule group built from c: the
// recording rules, the SLO rules and burn-rate alerts of every objective,
// and the threshold alerts. This is what a rule file, or a
// PrometheusRule's spec.groups, holds. It panics with a BUG: prefix when c
// does not validate: configurations come from [ParseConfig], which
// validates, or are modified copies made by tests.
func Groups(c Config) []Group {
	if err := c.Validate(); err != nil {
		panic("BUG: alerts: invalid configuration: " + err.Error())
	}
	out := recordingGroups(c.Thresholds)
	out = append(out, SLOGroups(c)...)
	return append(out, alertingGroups(c.Thresholds)...)
}

// Alerts returns every alerting rule built from c, in file order.
func Alerts(c Config) []Rule {
	var out []Rule
	for _, g := range Groups(c) {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// RecordedNames returns the name of every recording rule, once each, in
// file order: the series the rules add to Prometheus.
func RecordedNames() []string {
	var out []string
	seen := map[string]bool{}
	for _, g := range Groups(Default()) {
		for _, r := range g.Rules {
			if r.Record != "" && !seen[r.Record] {
				seen[r.Record] = true
				out = append(out, r.Record)
			}
		}
	}
	return out
}

// RulesFile is the generated rule file's name (under alerts/).
const RulesFile = "picometer.rules.yml"

// Render writes groups as a Prometheus rule file. header lines (without
// "# ") start the file.
func Render(groups []Group, header ...string) []byte {
	var b bytes.Buffer
	writeHeader(&b, header)
	b.WriteString("groups:\n")
	writeGroups(&b, "", groups)
	return b.Bytes()
}

// PrometheusRule writes groups as a prometheus-operator PrometheusRule
// object (monitoring.coreos.com/v1) named name, in namespace when not "".
func PrometheusRule(groups []Group, name, namespace string, header ...string) []byte {
	var b bytes.Buffer
	writeHeader(&b, header)
	b.WriteString("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n")
	fmt.Fprintf(&b, "  name: %s\n", yamlString(name))
	if namespace != "" {
		fmt.Fprintf(&b, "  namespace: %s\n", yamlString(namespace))
	}
	b.WriteString("  labels:\n    app.kubernetes.io/name: 'picometer'\n    app.kubernetes.io/component: 'alerting-rules'\n")
	b.WriteString("spec:\n  groups:\n")
	writeGroups(&b, "  ", groups)
	return b.Bytes()
}

func writeHeader(b *bytes.Buffer, header []string) {
	for _, h := range header {
		b.WriteString(strings.TrimRight("# "+h, " ") + "\n")
	}
}

// writeGroups writes the items of a groups: list, each line after indent.
func writeGroups(b *bytes.Buffer, indent string, groups []Group) {
	for _, g := range groups {
		fmt.Fprintf(b, "%s  - name: %s\n%s    rules:\n", indent, yamlString(g.Name), indent)
		for _, r := range g.Rules {
			if r.Record != "" {
				fmt.Fprintf(b, "%s      - record: %s\n", indent, yamlString(r.Record))
			} else {
				fmt.Fprintf(b, "%s      - alert: %s\n", indent, yamlString(r.Alert))
			}
			fmt.Fprintf(b, "%s        expr: %s\n", indent, yamlString(r.Expr))
			if r.For > 0 {
				fmt.Fprintf(b, "%s        for: %s\n", indent, PromDuration(r.For))
			}
			writeKVs(b, indent+"        ", "labels", r.Labels)
			writeKVs(b, indent+"        ", "annotations", r.Annotations)
		}
	}
}

func writeKVs(b *bytes.Buffer, indent, name string, kvs []KV) {
	if len(kvs) == 0 {
		return
	}
	fmt.Fprintf(b, "%s%s:\n", indent, name)
	for _, kv := range kvs {
		fmt.Fprintf(b, "%s  %s: %s\n", indent, kv.Key, yamlString(kv.Value))
	}
}

// yamlString renders s as a YAML scalar: single-quoted when it is one line
// of printable text (PromQL reads best that way), double-quoted with escapes
// otherwise.
func yamlString(s string) string {
	if strconv.CanBackquote(s) && !strings.ContainsAny(s, "\n\r\t") {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return strconv.Quote(s)
}

// PromDuration formats d the way Prometheus writes durations: "90s", "5m",
// "2h", "30d" (the largest unit that divides d exactly; milliseconds below
// 1s).
func PromDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
}
