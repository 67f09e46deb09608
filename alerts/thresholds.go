package alerts

import (
	"fmt"
	"time"

	"github.com/picometer/picometer/schema"
)

// Job is the Prometheus scrape job name the rules expect for
// picometer-sidecar targets (scripts/run.sh and the e2e check use it). The
// target-down and target-absent alerts select up{job=Job}.
const Job = "picometer-sidecar"

// Tier is one severity level of an alert: the alert fires when its value has
// been beyond Threshold for For.
type Tier struct {
	Threshold float64
	For       time.Duration
}

// Tiers are an alert's warning and critical levels. A zero For means the
// level is not used (single-tier alerts set only one of them).
type Tiers struct {
	Warning  Tier
	Critical Tier
}

// Thresholds holds every number the alerting rules compare against. It is
// the one place to tune them: [Default] is what alerts/picometer.rules.yml
// is generated from; tests build rule files from modified copies.
type Thresholds struct {
	// Job is the sidecar's scrape job name. Default [Job].
	Job string

	// TTFTP99 is the p99 time to first token over 5m, in seconds (above).
	// Default warning 2s for 10m, critical 5s for 5m.
	TTFTP99 Tiers
	// TimePerOutputTokenP99 is the p99 time per output token over 5m, in
	// seconds (above). Default warning 0.1s for 10m, critical 0.25s for 5m.
	TimePerOutputTokenP99 Tiers
	// ErrorRatio is the share of finished requests that failed on the
	// server side (error types in ServerErrorTypes) over 5m (above).
	// Default warning 0.02 for 10m, critical 0.1 for 5m.
	ErrorRatio Tiers
	// ServerErrorTypes are the error.type values that count as server-side
	// failures in ErrorRatio. Client errors (invalid_request, unauthorized,
	// not_found, …), client disconnects and shutdowns do not count.
	// Default engine_error, queue_full, timeout, _OTHER.
	ServerErrorTypes []string
	// WaitingPerSlot is waiting requests divided by engine slots (above).
	// Default warning 1 for 10m, critical 4 for 5m.
	WaitingPerSlot Tiers
	// KVCacheUsage is the KV-cache usage fraction (above). Default warning
	// 0.9 for 15m, critical 0.98 for 5m.
	KVCacheUsage Tiers
	// SpecAcceptance is the draft-token acceptance rate over 5m (below);
	// warning only. Default 0.1 for 15m.
	SpecAcceptance Tier
	// SpecMinDraftRate is the draft tokens per second under which the
	// acceptance alert stays quiet (too little speculation to judge).
	// Default 1.
	SpecMinDraftRate float64
	// EventsLostRatio is lost events / (lost + applied events) per sidecar
	// over 5m (above). Default warning 0 (any loss) for 1m, critical 0.05
	// for 5m.
	EventsLostRatio Tiers
	// DecodeErrorRatio is rejected lines / (rejected + applied events) per
	// sidecar over 5m (above). Default warning 0 (any) for 1m, critical 0.1
	// for 5m.
	DecodeErrorRatio Tiers
	// LastEventAge is the seconds since a sidecar last heard from a daemon
	// (above). Default warning 30s for 1m, critical 120s for 1m.
	LastEventAge Tiers
	// NoDaemon is how long a sidecar may have no daemon connected; warning
	// only (Threshold unused). Default for 5m.
	NoDaemon Tier
	// TargetDown is how long up{job=Job} may be 0; critical only
	// (Threshold unused). Default for 2m.
	TargetDown Tier
	// TargetAbsent is how long Prometheus may have no up{job=Job} series at
	// all; critical only (Threshold unused). Default for 10m.
	TargetAbsent Tier
}

// Default returns the thresholds alerts/picometer.rules.yml is generated
// from. They suit the default model on a CPU (about 4 ms per decode step at
// batch 1, prefill of a full 512-token context well under a second); tune
// them here, regenerate, and update the unit tests that move.
func Default() Thresholds {
	return Thresholds{
		Job: Job,
		TTFTP99: Tiers{
			Warning:  Tier{Threshold: 2, For: 10 * time.Minute},
			Critical: Tier{Threshold: 5, For: 5 * time.Minute},
		},
		TimePerOutputTokenP99: Tiers{
			Warning:  Tier{Threshold: 0.1, For: 10 * time.Minute},
			Critical: Tier{Threshold: 0.25, For: 5 * time.Minute},
		},
		ErrorRatio: Tiers{
			Warning:  Tier{Threshold: 0.02, For: 10 * time.Minute},
			Critical: Tier{Threshold: 0.1, For: 5 * time.Minute},
		},
		ServerErrorTypes: []string{schema.ErrEngine, schema.ErrQueueFull, schema.ErrTimeout, schema.ErrOther},
		WaitingPerSlot: Tiers{
			Warning:  Tier{Threshold: 1, For: 10 * time.Minute},
			Critical: Tier{Threshold: 4, For: 5 * time.Minute},
		},
		KVCacheUsage: Tiers{
			Warning:  Tier{Threshold: 0.9, For: 15 * time.Minute},
			Critical: Tier{Threshold: 0.98, For: 5 * time.Minute},
		},
		SpecAcceptance:   Tier{Threshold: 0.1, For: 15 * time.Minute},
		SpecMinDraftRate: 1,
		EventsLostRatio: Tiers{
			Warning:  Tier{Threshold: 0, For: time.Minute},
			Critical: Tier{Threshold: 0.05, For: 5 * time.Minute},
		},
		DecodeErrorRatio: Tiers{
			Warning:  Tier{Threshold: 0, For: time.Minute},
			Critical: Tier{Threshold: 0.1, For: 5 * time.Minute},
		},
		LastEventAge: Tiers{
			Warning:  Tier{Threshold: 30, For: time.Minute},
			Critical: Tier{Threshold: 120, For: time.Minute},
		},
		NoDaemon:     Tier{For: 5 * time.Minute},
		TargetDown:   Tier{For: 2 * time.Minute},
		TargetAbsent: Tier{For: 10 * time.Minute},
	}
}

// Validate reports the first threshold that is out of range or whose
// critical level is not stricter than its warning level.
func (t *Thresholds) Validate() error {
	if t.Job == "" {
		return fmt.Errorf("job: empty")
	}
	above := []struct {
		name string
		t    Tiers
	}{
		{"ttft_p99", t.TTFTP99},
		{"time_per_output_token_p99", t.TimePerOutputTokenP99},
		{"error_ratio", t.ErrorRatio},
		{"waiting_per_slot", t.WaitingPerSlot},
		{"kv_cache_usage", t.KVCacheUsage},
		{"events_lost_ratio", t.EventsLostRatio},
		{"decode_error_ratio", t.DecodeErrorRatio},
		{"last_event_age", t.LastEventAge},
	}
	for _, a := range above {
		if a.t.Warning.For <= 0 || a.t.Critical.For <= 0 {
			return fmt.Errorf("%s: both tiers need a positive for", a.name)
		}
		if a.t.Warning.Threshold < 0 {
			return fmt.Errorf("%s: warning threshold %v < 0", a.name, a.t.Warning.Threshold)
		}
		if a.t.Critical.Threshold <= a.t.Warning.Threshold {
			return fmt.Errorf("%s: critical threshold %v is not above warning %v", a.name, a.t.Critical.Threshold, a.t.Warning.Threshold)
		}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"kv_cache_usage", t.KVCacheUsage.Critical.Threshold}, {"error_ratio", t.ErrorRatio.Critical.Threshold},
		{"spec_acceptance", t.SpecAcceptance.Threshold}} {
		if r.v > 1 {
			return fmt.Errorf("%s: threshold %v is a fraction and cannot exceed 1", r.name, r.v)
		}
	}
	if len(t.ServerErrorTypes) == 0 {
		return fmt.Errorf("server_error_types: empty")
	}
	for _, e := range t.ServerErrorTypes {
		if !schema.AttrErrorType.Allows(e) {
			return fmt.Errorf("server_error_types: %q is not an error type of schema.ErrorTypes", e)
		}
	}
	for _, s := range []struct {
		name string
		t    Tier
	}{{"spec_acceptance", t.SpecAcceptance}, {"no_daemon", t.NoDaemon}, {"target_down", t.TargetDown}, {"target_absent", t.TargetAbsent}} {
		if s.t.For <= 0 {
			return fmt.Errorf("%s: for must be positive", s.name)
		}
	}
	if t.SpecMinDraftRate < 0 {
		return fmt.Errorf("spec_min_draft_rate: %v < 0", t.SpecMinDraftRate)
	}
	return nil
}
