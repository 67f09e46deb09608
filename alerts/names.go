package alerts

import (
	"strings"

	"github.com/picometer/picometer/schema"
)

// Label names used in rule expressions, derived from schema/ or set by
// Prometheus (job, instance) and histogram_quantile (le).
var (
	LabelModel        = schema.PromLabel(schema.AttrModel.Key)
	LabelEngine       = schema.PromLabel(schema.AttrEngine.Key)
	LabelFinishReason = schema.PromLabel(schema.AttrFinishReason.Key)
	LabelErrorType    = schema.PromLabel(schema.AttrErrorType.Key)
	LabelPhase        = schema.PromLabel(schema.AttrPhase.Key)
	LabelBatchSize    = schema.PromLabel(schema.AttrBatchSize.Key)
	LabelPosition     = schema.PromLabel(schema.AttrPosition.Key)
	LabelReason       = schema.PromLabel(schema.AttrDecodeReason.Key)
	LabelKind         = schema.PromLabel(schema.AttrEventKind.Key)
	LabelCache        = schema.PromLabel(schema.AttrCache.Key)
)

// Prometheus-side labels.
const (
	LabelJob      = "job"
	LabelInstance = "instance"
	LabelLE       = "le"
	LabelQuantile = "quantile"
)

// InstanceModel is the grouping of "instance_model" recording rules: one
// series per scrape target and served model.
var InstanceModel = []string{LabelJob, LabelInstance, LabelModel, LabelEngine}

// InstanceLabels is the grouping of "instance" recording rules: one series
// per scrape target (sidecar self-metrics carry no model).
var InstanceLabels = []string{LabelJob, LabelInstance}

// Series returns the exposed Prometheus series name of family id that ends
// in suffix: "" for counters and gauges, "_bucket", "_sum" or "_count" for
// histograms. It panics with a BUG: prefix when the family exposes no such
// series, so a rule can never name a series the sidecar lacks.
func Series(id, suffix string) string {
	f := schema.Lookup(id)
	want := f.PromName() + suffix
	for _, s := range f.Exposed() {
		if s == want {
			return s
		}
	}
	panic("BUG: alerts: family " + id + " exposes no series " + want)
}

// Quantiles are the quantiles recorded for latency histograms.
var Quantiles = []string{"0.5", "0.9", "0.99"}

// LatencyFamilies are the latency histograms whose quantiles and means are
// recorded (and plotted by the dashboard).
var LatencyFamilies = []string{
	schema.IDTTFT, schema.IDTimePerOutputToken, schema.IDInterTokenLatency,
	schema.IDRequestDuration, schema.IDQueueDuration, schema.IDPrefillDuration,
	schema.IDDecodeDuration,
}

// QuantileRecord is the recording rule holding histogram_quantile over 5m
// rates of family id, one series per target, model and quantile label.
func QuantileRecord(id string) string {
	return "instance_model_quantile:" + schema.Lookup(id).PromName() + ":histogram_quantile_rate5m"
}

// MeanRecord is the recording rule holding the mean of histogram family id
// over 5m (rate of _sum / rate of _count).
func MeanRecord(id string) string {
	return "instance_model:" + schema.Lookup(id).PromName() + ":mean5m"
}

// Recorded rates and ratios shared by the dashboard and the alerts.
var (
	// RecordFinishedRate is finished requests per second by finish reason.
	RecordFinishedRate = "instance_model_finish_reason:" + Series(schema.IDRequestsFinished, "") + ":rate5m"
	// RecordFailedRate is failed or aborted requests per second by error type.
	RecordFailedRate = "instance_model_error_type:" + Series(schema.IDRequestsFailed, "") + ":rate5m"
	// RecordErrorRatio is server-side failures / finished requests.
	RecordErrorRatio = "instance_model:" + trimTotal(Series(schema.IDRequestsFailed, "")) + "_per_finished:ratio_rate5m"
	// RecordSpecDraftRate is draft tokens proposed per second.
	RecordSpecDraftRate = "instance_model:" + Series(schema.IDSpecDraftTokens, "") + ":rate5m"
	// RecordSpecAcceptance is accepted / proposed draft tokens.
	RecordSpecAcceptance = "instance_model:" + trimTotal(Series(schema.IDSpecAcceptedTokens, "")) + "_per_draft_token:ratio_rate5m"
	// RecordWaitingPerSlot is waiting requests per engine slot.
	RecordWaitingPerSlot = "instance_model:" + Series(schema.IDRequestsWaiting, "") + "_per_slot:ratio"
	// RecordPrefixHitRatio1h is prompt tokens found in the prefix cache /
	// looked up over 1h; RecordPrefixHitRatio3h the same over 3h (the
	// collapse alert's baseline, an hour earlier).
	RecordPrefixHitRatio1h = "instance_model:" + trimTotal(Series(schema.IDPrefixHits, "")) + "_per_query:ratio_rate1h"
	RecordPrefixHitRatio3h = "instance_model:" + trimTotal(Series(schema.IDPrefixHits, "")) + "_per_query:ratio_rate3h"
	// RecordPrefixQueryRate1h is prompt tokens looked up per second over 1h.
	RecordPrefixQueryRate1h = "instance_model:" + Series(schema.IDPrefixQueries, "") + ":rate1h"
	// RecordEventsLostRatio is lost / (lost + applied) events per sidecar.
	RecordEventsLostRatio = "instance:" + trimTotal(Series(schema.IDSidecarEventsLost, "")) + ":ratio_rate5m"
	// RecordEventsDroppedRatio is the events daemons dropped (their queue
	// was full, or a write to the sidecar failed) / (those + applied
	// events) per sidecar.
	RecordEventsDroppedRatio = "instance:" + trimTotal(Series(schema.IDDaemonEventsDropped, "")) + ":ratio_rate5m"
	// RecordDecodeErrorRatio is rejected lines / (rejected + applied events)
	// per sidecar.
	RecordDecodeErrorRatio = "instance:" + trimTotal(Series(schema.IDSidecarDecodeErrors, "")) + ":ratio_rate5m"
)

func trimTotal(s string) string { return strings.TrimSuffix(s, "_total") }

// by renders a "sum by (…)" grouping clause.
func by(labels ...string) string { return "by (" + strings.Join(labels, ", ") + ")" }

func join(a []string, more ...string) []string {
	out := append([]string(nil), a...)
	return append(out, more...)
}
