// Command genrules writes alerts/picometer.rules.yml and its promtool unit
// tests (alerts/tests/picometer_test.yml, alerts/tests/slo_test.yml) from
// alerts/slo.toml through package alerts (make generate). Operators use
// picometer-rules instead.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/picometer/picometer/alerts"
	"github.com/picometer/picometer/internal/genfiles"
)

func main() {
	dir := flag.String("dir", "alerts", "the alerts/ directory to write into")
	flag.Parse()
	if err := genfiles.Write(*dir, alerts.Files()); err != nil {
		fmt.Fprintln(os.Stderr, "genrules:", err)
		os.Exit(1)
	}
}
