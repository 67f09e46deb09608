// Command metricsdoc writes schema/METRICS.md from the metric table.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/picometer/picometer/schema"
)

func main() {
	out := flag.String("o", "schema/METRICS.md", "output file")
	flag.Parse()
	if err := os.WriteFile(*out, schema.MetricsDoc(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "metricsdoc:", err)
		os.Exit(1)
	}
}
