package daemon

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/picometer/picometer/schema"
	"github.com/valyala/fasthttp"
)

// This file is CORS: the opt-in cors_origins config lets pages served from
// other origins call the API from a browser. cors_test.go covers it, and
// e2e/cors_test.go runs it in Chromium.
//
// Without cors_origins nothing changes: no Access-Control-* header, and
// OPTIONS is a 405 like any other method a route does not take. With it, a
// request whose Origin is listed (or any Origin, for "*") gets
// Access-Control-Allow-Origin (that origin) and Vary: Origin on its
// response, errors included; a preflight (OPTIONS with Origin and
// Access-Control-Request-Method) from a listed origin is a 204 that allows
// GET and POST and the headers asked for (the OpenAI SDKs send their own
// x-stainless-* headers, and Authorization when an API key is set);
// a preflight from any other origin is a 403 without those headers, which
// the browser reports as a CORS failure. A preflight carries no
// credentials, so it is answered before the API key check; the request
// that follows is checked as usual.

// corsMaxAge is how long a browser may cache a preflight's answer (s).
const corsMaxAge = "600"

// checkCORSOrigins validates cors_origins: "*" or scheme://host[:port]
// exactly as browsers send Origin (no path, no trailing slash).
func checkCORSOrigins(origins []string) error {
	for i, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "/") {
			return fmt.Errorf("cors_origins[%d]: %q is not \"*\" nor an origin such as \"https://app.example.com\" or \"http://localhost:5173\"", i, o)
		}
	}
	return nil
}

// corsAllowed reports whether origin may call the API.
func (d *Daemon) corsAllowed(origin []byte) bool {
	if len(origin) == 0 {
		return false
	}
	for _, o := range d.cfg.CORSOrigins {
		if o == "*" || o == string(origin) {
			return true
		}
	}
	return false
}

// preflight answers an OPTIONS request when CORS is on, and reports
// whether it did; with CORS off the route answers it (a 405).
func (d *Daemon) preflight(ctx *fasthttp.RequestCtx) bool {
	if len(d.cfg.CORSOrigins) == 0 || !ctx.IsOptions() {
		return false
	}
	origin := ctx.Request.Header.Peek("Origin")
	if len(origin) == 0 || len(ctx.Request.Header.Peek("Access-Control-Request-Method")) == 0 {
		return false
	}
	if !d.corsAllowed(origin) {
		errCORSOrigin(origin).write(ctx)
		return true
	}
	h := &ctx.Response.Header
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	if req := ctx.Request.Header.Peek("Access-Control-Request-Headers"); len(req) > 0 {
		h.SetBytesV("Access-Control-Allow-Headers", req)
	}
	h.Set("Access-Control-Max-Age", corsMaxAge)
	return true
}

// corsHeaders adds the CORS response headers for an allowed Origin; handle
// calls it last, so error responses (which reset the response) get them.
func (d *Daemon) corsHeaders(ctx *fasthttp.RequestCtx) {
	if len(d.cfg.CORSOrigins) == 0 {
		return
	}
	h := &ctx.Response.Header
	h.Add("Vary", "Origin")
	origin := ctx.Request.Header.Peek("Origin")
	if !d.corsAllowed(origin) {
		return
	}
	h.SetBytesV("Access-Control-Allow-Origin", origin)
	// A page reads its request's trace ids only if they are exposed.
	h.Set("Access-Control-Expose-Headers", "traceresponse, X-Request-Id")
}

func errCORSOrigin(origin []byte) *apiError {
	return &apiError{Status: fasthttp.StatusForbidden, Type: typeInvalidRequest, Code: "cors_origin_not_allowed",
		Message: fmt.Sprintf("Origin %q is not in cors_origins.", origin), Kind: schema.ErrInvalidRequest}
}
