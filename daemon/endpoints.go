package daemon

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/picometer/picometer/schema"
)

// This file holds the small endpoints: /v1/models, /v1/models/{id},
// /health, /ready and /debug/engine_metrics. server_test.go covers them.

func (d *Daemon) models(ctx *fasthttp.RequestCtx) {
	b := []byte(`{"object":"list","data":[`)
	b = d.appendModel(b)
	b = append(b, "]}"...)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (d *Daemon) model1(ctx *fasthttp.RequestCtx, id string) {
	if id != d.model {
		errModelNotFound(id, d.model).write(ctx)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(d.appendModel(nil))
}

func (d *Daemon) appendModel(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, d.model)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, d.created, 10)
	b = append(b, `,"owned_by":"picometer","max_model_len":`...)
	b = strconv.AppendInt(b, int64(d.ctxLen), 10)
	return append(b, '}')
}

func (d *Daemon) health(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	if !d.unavailable(ctx) {
		ctx.SetBodyString(`{"status":"ok"}`)
	}
}

// unavailable answers 503 with the reason when the daemon is shutting down
// or its engine failed, the states both probes share, and reports whether
// it did.
func (d *Daemon) unavailable(ctx *fasthttp.RequestCtx) bool {
	switch {
	case d.draining.Load():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"shutting_down"}`)
	case d.loop.failedFlag.Load():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"engine_failed"}`)
	default:
		return false
	}
	return true
}

// readyStall is how long the engine loop may go without finishing an
// iteration before /ready turns 503: idle, it wakes every snapshot
// interval; busy, after every step.
func (d *Daemon) readyStall() time.Duration {
	return max(5*time.Second, 5*d.cfg.Metrics.SnapshotInterval)
}

// ready is the readiness probe: 200 once the model is loaded (the daemon
// listens only after) and while the engine loop is stepping, so a router
// sends requests only to a replica that will start them; 503 while
// shutting down, after an engine failure, or when the loop has not
// finished an iteration for readyStall (a step that hangs). /health is
// the liveness probe: it stays 200 through a slow step, so a busy replica
// is taken out of rotation, not restarted.
func (d *Daemon) ready(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	if d.unavailable(ctx) {
		return
	}
	age := time.Duration(d.clock() - d.loop.beat.Load())
	switch {
	case d.loop.beat.Load() == 0:
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"starting"}`)
	case age > d.readyStall():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"engine_stalled","since_last_step_seconds":` +
			strconv.FormatFloat(age.Seconds(), 'f', 3, 64) + `}`)
	default:
		b := append([]byte(`{"status":"ready","model":`), appendJSONString(nil, d.model)...)
		ctx.SetBody(append(b, '}'))
	}
}

// debugBody is /debug/engine_metrics: the snapshot, the kernel path the
// engine computes with (native.Kernels; engine.kernel chose it) and the
// bytes of weights it computes with repacked: F16 in panels, Q4_K and
// Q6_K in tiles of 8 rows, Q4_0 in tiles of 8 rows (AVX2, AVX-512 VNNI).
type debugBody struct {
	*schema.EngineBody
	Kernel        string `json:"kernel"`
	F16PanelBytes int64  `json:"f16_panel_bytes"` // native.ModelInfo.F16PanelBytes
	KX8Bytes      int64  `json:"kx8_bytes"`       // native.ModelInfo.KX8Bytes
	Q32X8Bytes    int64  `json:"q32x8_bytes"`     // native.ModelInfo.Q32X8Bytes
	RowCopyBytes  int64  `json:"row_copy_bytes"`  // native.ModelInfo.RowCopyBytes
	// the cache the engine found, the bytes a decode step reads, and
	// whether they stream from memory (native.ModelInfo.WeightsBeyondLLC)
	LLCBytes         int64 `json:"llc_bytes"`
	StepWeightBytes  int64 `json:"step_weight_bytes"`
	WeightsBeyondLLC bool  `json:"weights_beyond_llc"`
}

// debugMetrics serves a fresh engine snapshot in MLC-LLM's EngineMetrics
// shape (schema.EngineBody), with the emitter's events_dropped and the
// kernel path in use ("kernel", with "f16_panel_bytes", "kx8_bytes", "q32x8_bytes" and "row_copy_bytes"; "llc_bytes", "step_weight_bytes" and "weights_beyond_llc"). Its steps list is empty: step records go
// to the sidecar.
func (d *Daemon) debugMetrics(ctx *fasthttp.RequestCtx) {
	b := d.loop.snapshot()
	if b == nil {
		errShuttingDown.write(ctx)
		return
	}
	out, err := json.Marshal(debugBody{b, d.info.Kernel, d.info.F16PanelBytes, d.info.KX8Bytes, d.info.Q32X8Bytes, d.info.RowCopyBytes,
		d.info.LLCBytes, d.info.StepWeightBytes, d.info.WeightsBeyondLLC()})
	if err != nil {
		errInternal(fmt.Sprintf("encode engine metrics: %v", err)).write(ctx)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(out)
}
