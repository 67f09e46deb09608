// Command gendeploy writes the generated parts of deploy/kubernetes from
// alerts/ and dashboards/ (run by `make generate` after those are
// regenerated).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/picometer/picometer/deploy"
)

func main() {
	repo := flag.String("repo", ".", "the repository root")
	flag.Parse()
	files, err := deploy.Files(*repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendeploy:", err)
		os.Exit(1)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(*repo, name), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gendeploy:", err)
			os.Exit(1)
		}
	}
}
