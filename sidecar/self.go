package sidecar

import (
	"time"

	"github.com/picometer/picometer/schema"
)

// This file: socket_test.go and registry_test.go cover it (decode errors by
// reason, connections, events by kind in the goldens).

// selfMetrics are the sidecar's own series (schema source "sidecar") that
// have no daemon labels: events applied by kind, rejected lines by reason,
// open connections, failed OTLP exports and the heartbeat (the wall-clock
// time of each scrape or export, so liveness reads the same on both paths). Every label value of their
// closed sets is registered up front, so a rate over them is 0, not absent.
// (events_lost and last_event_age carry model and engine and live on the
// daemon's target.)
type selfMetrics struct {
	events         []*counterSeries // by schema.AttrEventKind.Values
	decodeErrors   []*counterSeries // by schema.DecodeReasons
	connections    *gaugeSeries
	exportFailures *counterSeries
	spansLost      *spanLoss // counted only while spans are on
	heartbeat      *gaugeSeries
	all            []series
}

func newSelfMetrics(r *registry, clock func() time.Time) *selfMetrics {
	now := clock()
	s := &selfMetrics{}
	for _, k := range schema.AttrEventKind.Values {
		c := r.newCounter(schema.IDSidecarEvents, now, label{schema.AttrEventKind, k})
		s.events = append(s.events, c)
		s.all = append(s.all, c)
	}
	for _, reason := range schema.DecodeReasons {
		c := r.newCounter(schema.IDSidecarDecodeErrors, now, label{schema.AttrDecodeReason, reason})
		s.decodeErrors = append(s.decodeErrors, c)
		s.all = append(s.all, c)
	}
	s.connections = r.newGauge(schema.IDSidecarConnections, now, nil)
	s.exportFailures = r.newCounter(schema.IDSidecarExportFailure, now)
	s.spansLost = s.newSpanLoss(r, now)
	s.heartbeat = r.newGauge(schema.IDSidecarHeartbeat, now, func() float64 { return float64(clock().UnixMilli()) / 1e3 })
	s.all = append(s.all, s.connections, s.exportFailures, s.heartbeat)
	return s
}

// newSpanLoss registers spans_lost, one series per reason.
func (s *selfMetrics) newSpanLoss(r *registry, now time.Time) *spanLoss {
	l := &spanLoss{}
	for _, reason := range schema.SpanLossReasons {
		c := r.newCounter(schema.IDSidecarSpansLost, now, label{schema.AttrSpanLossReason, reason})
		l.byReason = append(l.byReason, c)
		s.all = append(s.all, c)
	}
	return l
}

// reject counts a rejected line under its reason. Every rejection the
// decoder and the aggregator make is a *schema.DecodeError; anything else
// would be a bug, counted as invalid_field rather than crashing on input.
func (s *selfMetrics) reject(err error) {
	reason := schema.ReasonOf(err)
	for i, r := range schema.DecodeReasons {
		if r == reason {
			s.decodeErrors[i].c.Inc()
			return
		}
	}
	s.decodeErrors[reasonIndex(schema.ReasonInvalidField)].c.Inc()
}

func reasonIndex(reason string) int { return indexOf(schema.DecodeReasons, reason) }
