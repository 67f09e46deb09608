// Command gendashboards writes the Grafana dashboards of package dashboards
// (dashboards/*.json).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/picometer/picometer/dashboards"
)

func main() {
	dir := flag.String("dir", "dashboards", "the dashboards/ directory to write into")
	flag.Parse()
	for name, data := range dashboards.Files() {
		if err := os.WriteFile(filepath.Join(*dir, name), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gendashboards:", err)
			os.Exit(1)
		}
	}
}
