package daemon

import (
	"strconv"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/picometer/picometer/native"
	"github.com/picometer/picometer/schema"
)

// GET /metrics on the serving port: the routing gauges of
// schema.RoutingProfile for request routers (the Gateway API Inference
// Extension's endpoint picker scrapes every pod every 50 ms). They come
// from the engine loop's live state, published after every loop iteration
// (so at most one engine step old), not from the engine snapshot, and a
// scrape never waits for the loop: it reads atomics. Like /health it needs
// no API key. With compat on (the default) the vLLM names are served too.

const pathRoutingMetrics = "/metrics"

// routingGauges is the live state a router reads: written by the engine
// loop goroutine (the engine's owner), read by any scrape.
type routingGauges struct {
	running, waiting atomic.Int64
	kvUsed, kvTotal  atomic.Int64
	prefixQ, prefixH atomic.Int64  // prefix-cache tokens queried and hit
	cfg              native.Config // set before the loop starts, then read-only
}

// kvReporter is the engine's optional KV-cache reading (*native.Engine
// has it); an engine without it reports usage 0.
type kvReporter interface {
	KVBlocks() (used, total int)
}

// publish reads eng's load and KV-cache blocks; only the goroutine that
// owns eng calls it.
func (g *routingGauges) publish(eng Engine) {
	r, w := eng.Load()
	g.running.Store(int64(r))
	g.waiting.Store(int64(w))
	if kv, ok := eng.(kvReporter); ok {
		used, total := kv.KVBlocks()
		g.kvUsed.Store(int64(used))
		g.kvTotal.Store(int64(total))
	}
	if pc, ok := eng.(prefixReporter); ok {
		q, h := pc.PrefixCache()
		g.prefixQ.Store(q)
		g.prefixH.Store(h)
	}
}

// prefixReporter is the engine's optional prefix-cache reading
// (*native.Engine has it); an engine without it reports 0.
type prefixReporter interface {
	PrefixCache() (queries, hits int64)
}

// routingMetrics serves the routing gauges in the Prometheus text format.
func (d *Daemon) routingMetrics(ctx *fasthttp.RequestCtx) {
	if !d.get(ctx) {
		return
	}
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.SetBody(d.appendRoutingMetrics(make([]byte, 0, 2048)))
}

// appendRoutingMetrics appends the exposition of the routing gauges.
func (d *Daemon) appendRoutingMetrics(b []byte) []byte {
	g := &d.loop.gauges
	running, waiting := g.running.Load(), g.waiting.Load()
	used, total := g.kvUsed.Load(), g.kvTotal.Load()
	usage := 0.0
	if total > 0 {
		usage = float64(used) / float64(total)
	}
	ec := g.cfg
	modelLabels := func(b []byte) []byte {
		b = appendLabel(b, schema.AttrModel.PromLabel(), d.model, true)
		return appendLabel(b, schema.AttrEngine.PromLabel(), EngineName, false)
	}
	vllmLabels := func(b []byte) []byte {
		return appendLabel(b, schema.VLLMModelLabel, d.model, true)
	}
	for _, rg := range schema.RoutingProfile {
		f := schema.Lookup(rg.Family)
		name := f.PromName()
		typ := "gauge"
		if f.Kind == schema.KindCounter {
			typ = "counter"
		}
		b = appendHelpType(b, name, rg.Help, typ)
		b = append(b, name...)
		b = modelLabels(append(b, '{'))
		var v float64
		var aliasLabels func([]byte) []byte
		switch rg.Family {
		case schema.IDRequestsWaiting:
			v, aliasLabels = float64(waiting), vllmLabels
		case schema.IDRequestsRunning:
			v, aliasLabels = float64(running), vllmLabels
		case schema.IDKVCacheUsage:
			v, aliasLabels = usage, vllmLabels
		case schema.IDPrefixQueries:
			v, aliasLabels = float64(g.prefixQ.Load()), vllmLabels
		case schema.IDPrefixHits:
			v, aliasLabels = float64(g.prefixH.Load()), vllmLabels
		case schema.IDEngineInfo:
			for _, kv := range [][2]string{
				{schema.AttrBMax.PromLabel(), strconv.Itoa(ec.BMax)},
				{schema.AttrContextLength.PromLabel(), strconv.Itoa(d.ctxLen)},
				{schema.AttrBlockSize.PromLabel(), strconv.Itoa(ec.BlockSize)},
				{schema.AttrSpecK.PromLabel(), strconv.Itoa(ec.SpecK)},
				{schema.AttrVersion.PromLabel(), Version},
			} {
				b = appendLabel(b, kv[0], kv[1], false)
			}
			v = 1
			aliasLabels = func(b []byte) []byte {
				b = appendLabel(b, "block_size", strconv.Itoa(ec.BlockSize), true)
				return appendLabel(b, "num_gpu_blocks", strconv.FormatInt(total, 10), false)
			}
		default:
			panic("BUG: daemon: routing gauge for family " + rg.Family + " has no value")
		}
		b = appendValue(append(b, '}', ' '), v)
		if !d.cfg.Compat {
			continue
		}
		for _, a := range rg.Aliases {
			b = appendHelpType(b, a.Name, rg.Help, typ)
			b = aliasLabels(append(append(b, a.Name...), '{'))
			b = appendValue(append(b, '}', ' '), v)
		}
	}
	if d.cfg.Compat {
		a := schema.LoRAInfoAlias
		b = appendHelpType(b, a.Name, "LoRA adapters: none; the value is the daemon's start time.", "gauge")
		b = append(b, a.Name...)
		b = appendLabel(append(b, '{'), "max_lora", "0", true)
		b = appendLabel(b, "running_lora_adapters", "", false)
		b = appendLabel(b, "waiting_lora_adapters", "", false)
		b = appendValue(append(b, '}', ' '), float64(d.created))
	}
	return b
}

func appendHelpType(b []byte, name, help, typ string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, help...)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, typ...)
	return append(b, '\n')
}

// appendLabel appends name="value" (escaped as the text format requires),
// preceded by a comma unless first.
func appendLabel(b []byte, name, value string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, name...)
	b = append(b, '=', '"')
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '"':
			b = append(b, '\\', '"')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func appendValue(b []byte, v float64) []byte {
	return append(strconv.AppendFloat(b, v, 'g', -1, 64), '\n')
}
