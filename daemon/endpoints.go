package daemon

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"
)

// This file holds the small endpoints: /v1/models, /v1/models/{id},
// /health and /debug/engine_metrics. server_test.go covers them.

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
	switch {
	case d.draining.Load():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"shutting_down"}`)
	case d.loop.failedFlag.Load():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"engine_failed"}`)
	default:
		ctx.SetBodyString(`{"status":"ok"}`)
	}
}

// debugMetrics serves a fresh engine snapshot in MLC-LLM's EngineMetrics
// shape (schema.EngineBody), with the emitter's events_dropped. Its steps
// list is empty: step records go to the sidecar.
func (d *Daemon) debugMetrics(ctx *fasthttp.RequestCtx) {
	b := d.loop.snapshot()
	if b == nil {
		errShuttingDown.write(ctx)
		return
	}
	out, err := json.Marshal(b)
	if err != nil {
		errInternal(fmt.Sprintf("encode engine metrics: %v", err)).write(ctx)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(out)
}
