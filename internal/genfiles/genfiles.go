// Package genfiles writes what the generators behind `make generate`
// produce: alerts/cmd/genrules, dashboards/cmd/gendashboards and
// deploy/cmd/gendeploy each hand it their package's files.
package genfiles

import (
	"os"
	"path/filepath"
)

// Write writes every file of files (a path relative to dir → its bytes)
// under dir, mode 0644, stopping at the first error.
func Write(dir string, files map[string][]byte) error {
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
