package logging

import (
	"log/slog"
	"testing"
)

func TestParseLevel(t *testing.T) {
	for s, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := ParseLevel(s); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "INFO", "warning", "trace"} {
		_, err := ParseLevel(s)
		if want := `log_level: "` + s + `" is not one of debug, info, warn, error`; err == nil || err.Error() != want {
			t.Errorf("ParseLevel(%q): error %v, want %s", s, err, want)
		}
	}
}
