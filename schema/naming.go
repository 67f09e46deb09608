package schema

import (
	"strings"
)

// unitWords maps UCUM units to the word the OTLP→Prometheus translation
// appends. It is the table used by the OpenTelemetry Collector's Prometheus
// translator and by VictoriaMetrics' -opentelemetry.usePrometheusNaming.
// Unit "1" maps to no word; gauges with unit "1" get "_ratio" instead.
var unitWords = map[string]string{
	"d": "days", "h": "hours", "min": "minutes", "s": "seconds",
	"ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds",
	"By": "bytes", "KiBy": "kibibytes", "MiBy": "mebibytes", "GiBy": "gibibytes",
	"TiBy": "tibibytes", "KBy": "kilobytes", "MBy": "megabytes", "GBy": "gigabytes",
	"TBy": "terabytes",
	"m":   "meters", "V": "volts", "A": "amperes", "J": "joules", "W": "watts", "g": "grams",
	"Cel": "celsius", "Hz": "hertz", "1": "", "%": "percent",
}

// perUnitWords maps the denominator of a "x/y" unit to its word ("per_second").
var perUnitWords = map[string]string{
	"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month", "y": "year",
}

// PromName derives the Prometheus metric name of an OpenTelemetry metric with
// the given name, UCUM unit and kind, following the standard OTLP→Prometheus
// translation:
//
//   - the name is split into words at every character that is not a letter or
//     a digit, and the words are joined with "_" (so "." becomes "_" and runs of
//     separators collapse);
//   - the unit's word ("s" → "seconds", "By" → "bytes", "1/s" → "per_second") is
//     appended unless the name already contains it; annotations such as
//     "{token}" add nothing;
//   - monotonic counters end in "_total" (moved to the end if the name already
//     has it); gauges and up-down counters with unit "1" end in "_ratio".
//
// The result for a valid declaration matches ^[a-zA-Z_][a-zA-Z0-9_]*$.
// Histogram series add "_bucket", "_sum" and "_count" to it (see
// [Family.Exposed]).
func PromName(otelName, unit string, kind Kind) string {
	words := splitWords(otelName)

	main, per, _ := strings.Cut(unit, "/")
	main, per = strings.TrimSpace(main), strings.TrimSpace(per)
	if main != "" && !strings.Contains(main, "{") {
		if w, ok := unitWords[main]; ok {
			main = w
		}
		if main != "" && !contains(words, main) {
			words = append(words, main)
		}
	}
	if per != "" && !strings.Contains(per, "{") {
		if w, ok := perUnitWords[per]; ok {
			per = w
		}
		if per != "" && !contains(words, per) {
			words = append(words, "per", per)
		}
	}
	switch {
	case kind == KindCounter:
		words = moveOrAppend(words, "total")
	case unit == "1" && (kind == KindGauge || kind == KindUpDownCounter):
		words = moveOrAppend(words, "ratio")
	}
	return strings.Join(words, "_")
}

// PromLabel derives the Prometheus label name of an OpenTelemetry attribute
// key: every character outside [a-zA-Z0-9_] becomes "_", a leading digit gets
// the prefix "key_" and a single leading underscore the prefix "key".
func PromLabel(key string) string {
	if key == "" {
		return ""
	}
	b := []byte(key)
	for i, c := range b {
		if !isAlnum(c) && c != '_' {
			b[i] = '_'
		}
	}
	s := string(b)
	switch {
	case s[0] >= '0' && s[0] <= '9':
		return "key_" + s
	case strings.HasPrefix(s, "_") && !strings.HasPrefix(s, "__"):
		return "key" + s
	}
	return s
}

func splitWords(name string) []string {
	var words []string
	start := -1
	for i := 0; i < len(name); i++ {
		if isAlnum(name[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			words = append(words, name[start:i])
			start = -1
		}
	}
	if start >= 0 {
		words = append(words, name[start:])
	}
	return words
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func contains(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

func moveOrAppend(words []string, w string) []string {
	out := words[:0:0]
	for _, x := range words {
		if x != w {
			out = append(out, x)
		}
	}
	return append(out, w)
}
