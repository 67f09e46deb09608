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

// Thresholds holds every number the threshold alerts compare against:
// the alerts no service level objective expresses. Their values come from
// the [thresholds.*] tables of alerts/slo.toml (see [Config]); tests build
// rule files from modified copies.
type Thresholds struct {
	// Job is the sidecar's scrape job name (key job).
	Job string

	// ServerErrorTypes are the error.type values that count as server-side
	// failures: in the availability objectives and the error ratio the
	// dashboard plots. Client errors (invalid_request, unauthorized,
	// not_found, …), client disconnects and shutdowns do not count (key
	// server_error_types).
	ServerErrorTypes []string
	// WaitingPerSlot is waiting requests divided by engine slots (above).
	WaitingPerSlot Tiers
	// KVCacheUsage is the KV-cache usage fraction (above).
	KVCacheUsage Tiers
	// SpecAcceptance is the draft-token acceptance rate over 5m (below);
	// warning only.
	SpecAcceptance Tier
	// SpecMinDraftRate is the draft tokens per second under which the
	// acceptance alert stays quiet (too little speculation to judge).
	SpecMinDraftRate float64
	// PrefixCacheDrop is the prefix-cache hit ratio of the last hour as a
	// fraction of the ratio over the 3 hours before it (below): 0.5 warns
	// when the hour's ratio fell under half its recent level; warning only
	// (key prefix_cache_collapse.warning).
	PrefixCacheDrop Tier
	// PrefixCacheMinBaseline is the ratio over the 3 hours before under
	// which the collapse alert stays quiet: a workload that shares few
	// prefixes has no cache to lose (key prefix_cache_collapse.min_baseline).
	PrefixCacheMinBaseline float64
	// PrefixCacheMinQueryRate is the prompt tokens looked up per second
	// over the last hour under which the collapse alert stays quiet, so an
	// idle server does not warn (key prefix_cache_collapse.min_query_rate).
	PrefixCacheMinQueryRate float64
	// EventsLostRatio is lost events / (lost + applied events) per sidecar
	// over 5m (above).
	EventsLostRatio Tiers
	// DecodeErrorRatio is rejected lines / (rejected + applied events) per
	// sidecar over 5m (above).
	DecodeErrorRatio Tiers
	// LastEventAge is the seconds since a sidecar last heard from a daemon
	// (above).
	LastEventAge Tiers
	// NoDaemon is how long a sidecar may have no daemon connected; warning
	// only (Threshold unused).
	NoDaemon Tier
	// TargetDown is how long up{job=Job} may be 0; critical only
	// (Threshold unused).
	TargetDown Tier
	// TargetAbsent is how long Prometheus may have no up{job=Job} series at
	// all; critical only (Threshold unused).
	TargetAbsent Tier
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
		{"waiting_per_slot", t.WaitingPerSlot},
		{"kv_cache_usage", t.KVCacheUsage},
		{"events_lost_ratio", t.EventsLostRatio},
		{"decode_error_ratio", t.DecodeErrorRatio},
		{"last_event_age", t.LastEventAge},
	}
	for _, a := range above {
		if a.t.Warning.For <= 0 || a.t.Critical.For <= 0 {
			return fmt.Errorf("thresholds.%s: both tiers need a positive for", a.name)
		}
		if a.t.Warning.Threshold < 0 {
			return fmt.Errorf("thresholds.%s: warning threshold %v < 0", a.name, a.t.Warning.Threshold)
		}
		if a.t.Critical.Threshold <= a.t.Warning.Threshold {
			return fmt.Errorf("thresholds.%s: critical threshold %v is not above warning %v", a.name, a.t.Critical.Threshold, a.t.Warning.Threshold)
		}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"kv_cache_usage", t.KVCacheUsage.Critical.Threshold},
		{"spec_acceptance", t.SpecAcceptance.Threshold}} {
		if r.v > 1 {
			return fmt.Errorf("thresholds.%s: threshold %v is a fraction and cannot exceed 1", r.name, r.v)
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
			return fmt.Errorf("thresholds.%s: for must be positive", s.name)
		}
	}
	if t.SpecMinDraftRate < 0 {
		return fmt.Errorf("thresholds.spec_acceptance.min_draft_rate: %v < 0", t.SpecMinDraftRate)
	}
	if d := t.PrefixCacheDrop; !(d.Threshold > 0 && d.Threshold < 1) {
		return fmt.Errorf("thresholds.prefix_cache_collapse.warning: %v is not a fraction of the baseline between 0 and 1 (exclusive)", d.Threshold)
	} else if d.For <= 0 {
		return fmt.Errorf("thresholds.prefix_cache_collapse: for must be positive")
	}
	if b := t.PrefixCacheMinBaseline; !(b >= 0 && b <= 1) {
		return fmt.Errorf("thresholds.prefix_cache_collapse.min_baseline: %v is not a ratio between 0 and 1", b)
	}
	if t.PrefixCacheMinQueryRate < 0 {
		return fmt.Errorf("thresholds.prefix_cache_collapse.min_query_rate: %v < 0", t.PrefixCacheMinQueryRate)
	}
	return nil
}
