// Command genrules writes alerts/picometer.rules.yml and its promtool unit
// tests (alerts/tests/picometer_test.yml, alerts/tests/slo_test.yml) from
// alerts/slo.toml through package alerts (make generate). Operators use
// picometer-rules instead.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/picometer/picometer/alerts"
)

func main() {
	dir := flag.String("dir", "alerts", "the alerts/ directory to write into")
	flag.Parse()
	for name, data := range alerts.Files() {
		path := filepath.Join(*dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "genrules:", err)
			os.Exit(1)
		}
	}
}
