package dashboards

import (
	"bytes"
	"encoding/json"
)

// Files returns the generated dashboards by file name under dashboards/.
func Files() map[string][]byte {
	return map[string][]byte{OverviewFile: Render(Overview())}
}

// Render returns d as indented JSON with a trailing newline (Grafana's
// export format; HTML characters are not escaped so queries stay readable).
func Render(d *Dashboard) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		panic("BUG: dashboards: " + err.Error())
	}
	return b.Bytes()
}

// AllPanels returns every visualization panel of d (rows excluded, panels
// inside collapsed rows included), in layout order.
func AllPanels(d *Dashboard) []*Panel {
	var out []*Panel
	var walk func([]*Panel)
	walk = func(ps []*Panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}
