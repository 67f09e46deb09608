package dashboards

// The Grafana dashboard JSON model (schemaVersion 39), as much of it as the
// generated dashboards use. Field names and nesting follow what Grafana 10
// and 11 export; zero values are left out.

// SchemaVersion is the Grafana dashboard schema version written.
const SchemaVersion = 39

// DatasourceVar is the name of the dashboard's Prometheus data-source
// variable; every panel and query refers to it.
const DatasourceVar = "datasource"

// Dashboard is a Grafana dashboard.
type Dashboard struct {
	Annotations          Annotations `json:"annotations"`
	Description          string      `json:"description"`
	Editable             bool        `json:"editable"`
	FiscalYearStartMonth int         `json:"fiscalYearStartMonth"`
	GraphTooltip         int         `json:"graphTooltip"`
	ID                   *int        `json:"id"`
	Links                []Link      `json:"links"`
	Panels               []*Panel    `json:"panels"`
	Refresh              string      `json:"refresh"`
	SchemaVersion        int         `json:"schemaVersion"`
	Tags                 []string    `json:"tags"`
	Templating           Templating  `json:"templating"`
	Time                 TimeRange   `json:"time"`
	Timepicker           struct{}    `json:"timepicker"`
	Timezone             string      `json:"timezone"`
	Title                string      `json:"title"`
	UID                  string      `json:"uid"`
	Version              int         `json:"version"`
}

// Annotations holds the dashboard's annotation queries.
type Annotations struct {
	List []Annotation `json:"list"`
}

// Annotation is one annotation query (only Grafana's built-in one is used).
type Annotation struct {
	BuiltIn    int            `json:"builtIn"`
	Datasource *DatasourceRef `json:"datasource"`
	Enable     bool           `json:"enable"`
	Hide       bool           `json:"hide"`
	IconColor  string         `json:"iconColor"`
	Name       string         `json:"name"`
	Type       string         `json:"type"`
}

// Link is a dashboard link.
type Link struct {
	Title       string `json:"title"`
	Type        string `json:"type"`
	URL         string `json:"url"`
	TargetBlank bool   `json:"targetBlank"`
	Icon        string `json:"icon"`
	Tooltip     string `json:"tooltip"`
	// Grafana's DashboardLink requires these (TestGrafanaTypes); false
	// and empty for a plain link.
	AsDropdown  bool     `json:"asDropdown"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
	Tags        []string `json:"tags"`
}

// DatasourceRef points at a data source by type and uid (here the
// ${datasource} variable).
type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// TimeRange is the dashboard's default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Templating holds the dashboard variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a dashboard variable of type "datasource" or "query".
type Variable struct {
	Name        string         `json:"name"`
	Label       string         `json:"label"`
	Description string         `json:"description,omitempty"`
	Type        string         `json:"type"`
	Datasource  *DatasourceRef `json:"datasource,omitempty"`
	// Query is the data-source type for a datasource variable, or a
	// VariableQuery for a query variable.
	Query      any      `json:"query"`
	Definition string   `json:"definition,omitempty"`
	Current    struct{} `json:"current"`
	Hide       int      `json:"hide"`
	IncludeAll bool     `json:"includeAll"`
	AllValue   string   `json:"allValue,omitempty"`
	Multi      bool     `json:"multi"`
	Options    []any    `json:"options"`
	Refresh    int      `json:"refresh"`
	Regex      string   `json:"regex"`
	Sort       int      `json:"sort,omitempty"`
	SkipURL    bool     `json:"skipUrlSync"`
}

// VariableQuery is a Prometheus query variable's query, as the Prometheus
// data source's variable editor stores it (qryType 1 = label values).
type VariableQuery struct {
	QryType int    `json:"qryType"`
	Query   string `json:"query"`
	RefID   string `json:"refId"`
}

// GridPos is a panel's position on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Panel is a dashboard panel: a row, or a visualization of type timeseries,
// heatmap, stat or bargauge.
type Panel struct {
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	ID          int            `json:"id"`
	GridPos     GridPos        `json:"gridPos"`
	Datasource  *DatasourceRef `json:"datasource,omitempty"`
	FieldConfig *FieldConfig   `json:"fieldConfig,omitempty"`
	Options     any            `json:"options,omitempty"`
	Targets     []Target       `json:"targets,omitempty"`
	Interval    string         `json:"interval,omitempty"`
	// Row panels only.
	Collapsed *bool    `json:"collapsed,omitempty"`
	Panels    []*Panel `json:"panels,omitempty"`
}

// FieldConfig holds a panel's field defaults and overrides.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []Override    `json:"overrides"`
}

// FieldDefaults are the standard field options of a panel.
type FieldDefaults struct {
	Unit       string         `json:"unit"`
	Min        *float64       `json:"min,omitempty"`
	Max        *float64       `json:"max,omitempty"`
	Decimals   *int           `json:"decimals,omitempty"`
	Color      *FieldColor    `json:"color,omitempty"`
	Thresholds *Thresholds    `json:"thresholds,omitempty"`
	Custom     map[string]any `json:"custom,omitempty"`
}

// FieldColor is a field's color mode.
type FieldColor struct {
	Mode string `json:"mode"`
}

// Thresholds are a field's color steps.
type Thresholds struct {
	Mode  string          `json:"mode"`
	Steps []ThresholdStep `json:"steps"`
}

// ThresholdStep is one color step; the first has a nil Value (base).
type ThresholdStep struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// Override changes field options for the fields a matcher selects.
type Override struct {
	Matcher    Matcher    `json:"matcher"`
	Properties []Property `json:"properties"`
}

// Matcher selects fields (e.g. by name).
type Matcher struct {
	ID      string `json:"id"`
	Options string `json:"options"`
}

// Property is one overridden field option.
type Property struct {
	ID    string `json:"id"`
	Value any    `json:"value"`
}

// Target is one Prometheus query of a panel.
type Target struct {
	Datasource   *DatasourceRef `json:"datasource"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat"`
	RefID        string         `json:"refId"`
	Format       string         `json:"format,omitempty"`
	Instant      bool           `json:"instant,omitempty"`
	Range        bool           `json:"range,omitempty"`
	EditorMode   string         `json:"editorMode"`
	Interval     string         `json:"interval,omitempty"`
	// Exemplar asks Grafana's Prometheus data source for the exemplars of
	// the query's series too (Prometheus with exemplar storage).
	Exemplar bool `json:"exemplar,omitempty"`
	// Inline is the same query written over the exported series instead
	// of recording rules, for a store that does not run alerts/'s rules
	// (the e2e test asks VictoriaMetrics, fed over OTLP, with it). Not
	// part of the dashboard JSON.
	Inline string `json:"-"`
}
