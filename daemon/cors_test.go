package daemon

import (
	"testing"
)

// TestCORS: with cors_origins, a preflight from a listed origin is a 204
// allowing the asked headers, from another origin a 403 without CORS
// headers; responses to a listed origin (errors too) carry
// Access-Control-Allow-Origin; "*" allows any origin; without
// cors_origins OPTIONS stays a 405 and no CORS header is sent.
func TestCORS(t *testing.T) {
	const allowed, other = "http://127.0.0.1:5173", "http://evil.example"
	ts := startServer(t, newFakeEngine(128), func(c *Config) {
		c.CORSOrigins = []string{allowed}
		c.APIKeys = []string{"k"}
		c.Metrics.Socket = ""
	})
	pre := func(origin string) httpResult {
		return ts.do("OPTIONS", "/v1/chat/completions", "", "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type,x-stainless-os")
	}
	r := pre(allowed)
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != allowed ||
		r.header.Get("Access-Control-Allow-Methods") != "GET, POST, OPTIONS" ||
		r.header.Get("Access-Control-Allow-Headers") != "authorization,content-type,x-stainless-os" ||
		r.header.Get("Access-Control-Max-Age") != "600" || r.header.Get("Vary") != "Origin" {
		t.Errorf("allowed preflight: %d %v %s", r.status, r.header, r.body)
	}
	r = pre(other)
	if e := decodeError(t, r.body); r.status != 403 || r.header.Get("Access-Control-Allow-Origin") != "" || *e.Code != "cors_origin_not_allowed" ||
		e.Message != `Origin "http://evil.example" is not in cors_origins.` {
		t.Errorf("other preflight: %d %v %s", r.status, r.header, r.body)
	}
	// The request itself: the key is checked as usual, and the answer,
	// error or not, is readable by the allowed origin only.
	r = ts.post("/v1/completions", `{"prompt":"x","max_tokens":2}`, "Origin", allowed, "Authorization", "Bearer k")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != allowed ||
		r.header.Get("Access-Control-Expose-Headers") != "traceresponse, X-Request-Id" {
		t.Errorf("allowed request: %d %v %s", r.status, r.header, r.body)
	}
	r = ts.post("/v1/completions", `{"prompt":"x","max_tokens":2}`, "Origin", allowed)
	if r.status != 401 || r.header.Get("Access-Control-Allow-Origin") != allowed {
		t.Errorf("allowed request without key: %d %v %s", r.status, r.header, r.body)
	}
	r = ts.post("/v1/completions", `{"prompt":"x","max_tokens":2}`, "Origin", other, "Authorization", "Bearer k")
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin's request: %d %v", r.status, r.header)
	}
	// An OPTIONS that is not a preflight is the route's 405.
	if r := ts.do("OPTIONS", "/v1/models", ""); r.status != 405 {
		t.Errorf("plain OPTIONS: %d %s", r.status, r.body)
	}

	star := startServer(t, newFakeEngine(128), func(c *Config) { c.CORSOrigins = []string{"*"}; c.Metrics.Socket = "" })
	r = star.do("OPTIONS", "/v1/models", "", "Origin", other, "Access-Control-Request-Method", "GET")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != other {
		t.Errorf("* preflight: %d %v", r.status, r.header)
	}

	off := startServer(t, newFakeEngine(128), func(c *Config) { c.Metrics.Socket = "" })
	r = off.do("OPTIONS", "/v1/chat/completions", "", "Origin", allowed, "Access-Control-Request-Method", "POST")
	if r.status != 405 || r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Vary") != "" {
		t.Errorf("CORS off, preflight: %d %v %s", r.status, r.header, r.body)
	}
}
