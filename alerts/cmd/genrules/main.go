// Command genrules writes alerts/picometer.rules.yml and the promtool unit
// tests alerts/tests/picometer_test.yml from the Go tables of package alerts.
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
