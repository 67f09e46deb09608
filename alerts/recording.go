package alerts

import (
	"fmt"
	"strings"

	"github.com/picometer/picometer/schema"
)

// Window is the range of every rate in the recording rules.
const Window = "5m"

// recordingGroups returns the recording rules: latency quantiles and means,
// request and error rates, the error ratio, speculative acceptance, queue
// pressure and sidecar loss ratios. The dashboard plots these series and the
// alerts compare them with thresholds, so both see the same numbers.
func recordingGroups(t Thresholds) []Group {
	var lat []Rule
	for _, id := range LatencyFamilies {
		for _, q := range Quantiles {
			lat = append(lat, Rule{
				Record: QuantileRecord(id),
				Expr: fmt.Sprintf("histogram_quantile(%s, sum %s (rate(%s[%s])))",
					q, by(join(InstanceModel, LabelLE)...), Series(id, "_bucket"), Window),
				Labels: []KV{{LabelQuantile, q}},
			})
		}
		lat = append(lat, Rule{
			Record: MeanRecord(id),
			Expr:   ratioOfRates(InstanceModel, Series(id, "_sum"), Series(id, "_count")),
		})
	}

	im := by(InstanceModel...)
	finished := Series(schema.IDRequestsFinished, "")
	failed := Series(schema.IDRequestsFailed, "")
	serverErrors := fmt.Sprintf(`%s{%s=~"%s"}`, failed, LabelErrorType, strings.Join(t.ServerErrorTypes, "|"))
	finishedRate := fmt.Sprintf("sum %s (rate(%s[%s]))", im, finished, Window)
	requests := []Rule{
		{
			Record: RecordFinishedRate,
			Expr:   fmt.Sprintf("sum %s (rate(%s[%s]))", by(join(InstanceModel, LabelFinishReason)...), finished, Window),
		},
		{
			Record: RecordFailedRate,
			Expr:   fmt.Sprintf("sum %s (rate(%s[%s]))", by(join(InstanceModel, LabelErrorType)...), failed, Window),
		},
		{
			// "or 0 * finished" makes the ratio 0, not absent, while no
			// server error has ever been counted.
			Record: RecordErrorRatio,
			Expr: fmt.Sprintf("(sum %s (rate(%s[%s])) or 0 * %s) / %s",
				im, serverErrors, Window, finishedRate, finishedRate),
		},
		{
			Record: RecordWaitingPerSlot,
			Expr: fmt.Sprintf("sum %s (%s) / sum %s (%s)", im, Series(schema.IDRequestsWaiting, ""),
				im, Series(schema.IDSlots, "")),
		},
	}

	spec := []Rule{
		{
			Record: RecordSpecDraftRate,
			Expr:   fmt.Sprintf("sum %s (rate(%s[%s]))", im, Series(schema.IDSpecDraftTokens, ""), Window),
		},
		{
			Record: RecordSpecAcceptance,
			Expr:   ratioOfRates(InstanceModel, Series(schema.IDSpecAcceptedTokens, ""), Series(schema.IDSpecDraftTokens, "")),
		},
	}

	hits, queries := Series(schema.IDPrefixHits, ""), Series(schema.IDPrefixQueries, "")
	prefix := []Rule{
		{Record: RecordPrefixHitRatio1h, Expr: ratioOfRatesOver(InstanceModel, hits, queries, "1h")},
		{Record: RecordPrefixHitRatio3h, Expr: ratioOfRatesOver(InstanceModel, hits, queries, "3h")},
		{Record: RecordPrefixQueryRate1h, Expr: fmt.Sprintf("sum %s (rate(%s[1h]))", im, queries)},
	}

	ib := by(InstanceLabels...)
	applied := fmt.Sprintf("sum %s (rate(%s[%s]))", ib, Series(schema.IDSidecarEvents, ""), Window)
	lossRatio := func(bad string) string {
		r := fmt.Sprintf("sum %s (rate(%s[%s]))", ib, bad, Window)
		return fmt.Sprintf("%s / (%s + %s)", r, r, applied)
	}
	sidecar := []Rule{
		{Record: RecordEventsLostRatio, Expr: lossRatio(Series(schema.IDSidecarEventsLost, ""))},
		{Record: RecordEventsDroppedRatio, Expr: lossRatio(fmt.Sprintf(`%s{%s=~"%s|%s"}`,
			Series(schema.IDDaemonEventsDropped, ""), LabelReason, schema.DropQueueFull, schema.DropWriteFail))},
		{Record: RecordDecodeErrorRatio, Expr: lossRatio(Series(schema.IDSidecarDecodeErrors, ""))},
	}

	return []Group{
		{Name: "picometer.latency.rules", Rules: lat},
		{Name: "picometer.requests.rules", Rules: requests},
		{Name: "picometer.spec_decode.rules", Rules: spec},
		{Name: "picometer.prefix_cache.rules", Rules: prefix},
		{Name: "picometer.sidecar.rules", Rules: sidecar},
	}
}

// ratioOfRates is sum by (labels) (rate(num[5m])) / sum by (labels) (rate(den[5m])).
func ratioOfRates(labels []string, num, den string) string {
	return ratioOfRatesOver(labels, num, den, Window)
}

// ratioOfRatesOver is ratioOfRates over window w.
func ratioOfRatesOver(labels []string, num, den, w string) string {
	b := by(labels...)
	return fmt.Sprintf("sum %s (rate(%s[%s])) / sum %s (rate(%s[%s]))", b, num, w, b, den, w)
}
