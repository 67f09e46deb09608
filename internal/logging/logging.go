// Package logging holds what picometerd and picometer-sidecar share about
// their logs.
package logging

import (
	"fmt"
	"log/slog"
)

// ParseLevel maps the log_level configuration key's value (debug, info,
// warn, error) to a slog level; the error names the key.
func ParseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log_level: %q is not one of debug, info, warn, error", s)
}
