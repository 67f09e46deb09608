package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// promAPI is a client of Prometheus's HTTP API.
type promAPI struct {
	base string // http://host:port
	c    *http.Client
}

// promSample is one element of an instant vector (or a scalar, with no
// labels).
type promSample struct {
	Metric map[string]string
	Value  float64
}

// apiResponse is the envelope of every /api/v1 answer.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

func (p promAPI) get(path string, params url.Values) (json.RawMessage, error) {
	u := p.base + path
	if params != nil {
		u += "?" + params.Encode()
	}
	resp, err := p.c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d, not JSON: %.200s", path, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// query runs an instant query at now. A parse or evaluation error is
// returned as reported by Prometheus.
func (p promAPI) query(expr string) ([]promSample, error) { return p.queryAt(expr, time.Now()) }

// queryAt runs an instant query evaluated at time at.
func (p promAPI) queryAt(expr string, at time.Time) ([]promSample, error) {
	data, err := p.get("/api/v1/query", url.Values{"query": {expr}, "time": {strconv.FormatInt(at.Unix(), 10)}})
	if err != nil {
		return nil, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	switch d.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(d.Result, &vec); err != nil {
			return nil, err
		}
		out := make([]promSample, 0, len(vec))
		for _, s := range vec {
			v, err := sampleValue(s.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, promSample{Metric: s.Metric, Value: v})
		}
		return out, nil
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(d.Result, &s); err != nil {
			return nil, err
		}
		v, err := sampleValue(s)
		return []promSample{{Value: v}}, err
	}
	return nil, fmt.Errorf("result type %q", d.ResultType)
}

func sampleValue(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v[1])
	}
	return strconv.ParseFloat(s, 64)
}

// labelValues returns the values of label among the series match selects
// (the API behind Grafana's label_values(match, label)).
func (p promAPI) labelValues(label, match string) ([]string, error) {
	data, err := p.get("/api/v1/label/"+url.PathEscape(label)+"/values", url.Values{"match[]": {match}})
	if err != nil {
		return nil, err
	}
	var vals []string
	return vals, json.Unmarshal(data, &vals)
}

// promAlert is one element of /api/v1/alerts.
type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    string            `json:"activeAt"`
	Value       string            `json:"value"`
}

// alerts returns the active (pending or firing) alerts and the raw JSON of
// the answer's data.
func (p promAPI) alerts() ([]promAlert, json.RawMessage, error) {
	data, err := p.get("/api/v1/alerts", nil)
	if err != nil {
		return nil, nil, err
	}
	var d struct {
		Alerts []promAlert `json:"alerts"`
	}
	return d.Alerts, data, json.Unmarshal(data, &d)
}

// promRule is one rule of /api/v1/rules.
type promRule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	Type      string `json:"type"`
}

// rules returns every loaded rule by group.
func (p promAPI) rules() (map[string][]promRule, error) {
	data, err := p.get("/api/v1/rules", nil)
	if err != nil {
		return nil, err
	}
	var d struct {
		Groups []struct {
			Name  string     `json:"name"`
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	out := map[string][]promRule{}
	for _, g := range d.Groups {
		out[g.Name] = append(out[g.Name], g.Rules...)
	}
	return out, nil
}

// finite reports whether any sample has a finite value.
func finite(samples []promSample) bool {
	for _, s := range samples {
		if !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
			return true
		}
	}
	return false
}

var grafanaVar = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)(?::[a-zA-Z0-9_]+)?\}|\$([a-zA-Z0-9_]+)`)

// expandGrafana replaces the Grafana variables of a dashboard query ($x,
// ${x}, ${x:format}) with vars[x]. A variable without a value is an error
// naming it, so a dashboard cannot use one this check does not know.
func expandGrafana(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaVar.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("query uses variables with no value here: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// regexValue is v as Grafana puts a single selected value into a =~
// matcher: regex-escaped, then escaped for a PromQL double-quoted string.
func regexValue(v string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
}
