// Command gendashboards writes the Grafana dashboards of package dashboards
// (dashboards/*.json).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/picometer/picometer/dashboards"
	"github.com/picometer/picometer/internal/genfiles"
)

func main() {
	dir := flag.String("dir", "dashboards", "the dashboards/ directory to write into")
	flag.Parse()
	if err := genfiles.Write(*dir, dashboards.Files()); err != nil {
		fmt.Fprintln(os.Stderr, "gendashboards:", err)
		os.Exit(1)
	}
}
