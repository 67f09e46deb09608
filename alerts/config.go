package alerts

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/picometer/picometer/schema"
)

// SLOFile is the committed objectives-and-thresholds file under alerts/.
const SLOFile = "slo.toml"

//go:embed slo.toml
var defaultSLOText []byte

// Config is everything the rules are generated from: the objectives and the
// thresholds of the alerts no objective expresses. It is decoded from TOML
// (alerts/slo.toml is the default; see [ParseConfig]).
type Config struct {
	Thresholds
	// Objectives are the service level objectives, in file order.
	Objectives []Objective
}

// Default returns the configuration decoded from the committed
// alerts/slo.toml: what alerts/picometer.rules.yml, its tests and the
// dashboard are generated from.
func Default() Config {
	c, err := ParseConfig(defaultSLOText, Config{})
	if err != nil {
		panic("BUG: alerts: " + SLOFile + ": " + err.Error())
	}
	return c
}

// LoadConfig reads an SLO file over [Default]: a key the file leaves out
// keeps its default; [[objective]] entries, when the file has any, replace
// the default objectives. Errors start with the path and name the key.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(data, Default())
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes TOML text over base strictly (unknown keys are an
// error naming the first of them) and validates the result.
func ParseConfig(data []byte, base Config) (Config, error) {
	f := toFile(base)
	f.Objectives = nil
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		var pe toml.ParseError
		switch {
		case errors.As(err, &pe) && pe.LastKey != "":
			return Config{}, fmt.Errorf("line %d (last key %q): %s", pe.Position.Line, pe.LastKey, pe.Message)
		case errors.As(err, &pe):
			return Config{}, fmt.Errorf("line %d: %s", pe.Position.Line, pe.Message)
		}
		return Config{}, errors.New(strings.TrimPrefix(err.Error(), "toml: "))
	}
	if und := md.Undecoded(); len(und) > 0 {
		return Config{}, fmt.Errorf("unknown key %q", und[0].String())
	}
	if !md.IsDefined("objective") {
		f.Objectives = toFile(base).Objectives
	}
	c, err := f.config()
	if err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks the thresholds and every objective; the first problem is
// returned, naming its key.
func (c *Config) Validate() error {
	if err := c.Thresholds.Validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, o := range c.Objectives {
		if err := o.Validate(); err != nil {
			if o.Name == "" || strings.HasPrefix(err.Error(), "name:") {
				return fmt.Errorf("objective[%d]: %w", i, err)
			}
			return fmt.Errorf("objective %q: %w", o.Name, err)
		}
		if seen[o.Name] {
			return fmt.Errorf("objective[%d]: name: %q is used twice", i, o.Name)
		}
		seen[o.Name] = true
	}
	return nil
}

// ---- the file's shape -----------------------------------------------------

type fileConfig struct {
	Job              string          `toml:"job"`
	ServerErrorTypes []string        `toml:"server_error_types"`
	Objectives       []fileObjective `toml:"objective"`
	Thresholds       fileThresholds  `toml:"thresholds"`
}

type fileObjective struct {
	Name        string            `toml:"name"`
	Description string            `toml:"description"`
	SLI         string            `toml:"sli"`
	Histogram   string            `toml:"histogram"`
	Target      string            `toml:"target"`
	Objective   *float64          `toml:"objective"`
	Window      string            `toml:"window"`
	Selector    map[string]string `toml:"selector"`
}

// fileTiers is a [thresholds.*] table; which keys a table accepts depends on
// its alert (fileWarning, fileCritical and fileSpec have fewer).
type fileTiers struct {
	Warning     *float64 `toml:"warning"`
	WarningFor  string   `toml:"warning_for"`
	Critical    *float64 `toml:"critical"`
	CriticalFor string   `toml:"critical_for"`
}

type fileWarningFor struct {
	WarningFor string `toml:"warning_for"`
}

type fileCriticalFor struct {
	CriticalFor string `toml:"critical_for"`
}

type fileSpec struct {
	Warning      *float64 `toml:"warning"`
	WarningFor   string   `toml:"warning_for"`
	MinDraftRate *float64 `toml:"min_draft_rate"`
}

type filePrefixCache struct {
	Warning      *float64 `toml:"warning"`
	WarningFor   string   `toml:"warning_for"`
	MinBaseline  *float64 `toml:"min_baseline"`
	MinQueryRate *float64 `toml:"min_query_rate"`
}

type fileThresholds struct {
	WaitingPerSlot   fileTiers       `toml:"waiting_per_slot"`
	KVCacheUsage     fileTiers       `toml:"kv_cache_usage"`
	SpecAcceptance   fileSpec        `toml:"spec_acceptance"`
	PrefixCache      filePrefixCache `toml:"prefix_cache_collapse"`
	EventsLostRatio  fileTiers       `toml:"events_lost_ratio"`
	DecodeErrorRatio fileTiers       `toml:"decode_error_ratio"`
	LastEventAge     fileTiers       `toml:"last_event_age"`
	NoDaemon         fileWarningFor  `toml:"no_daemon"`
	TargetDown       fileCriticalFor `toml:"target_down"`
	TargetAbsent     fileCriticalFor `toml:"target_absent"`
}

func fptr(v float64) *float64 { return &v }

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return PromDuration(d)
}

// toFile renders c in the file's shape (the base a file is decoded over).
func toFile(c Config) fileConfig {
	tiers := func(t Tiers) fileTiers {
		if t == (Tiers{}) {
			return fileTiers{}
		}
		return fileTiers{fptr(t.Warning.Threshold), durString(t.Warning.For), fptr(t.Critical.Threshold), durString(t.Critical.For)}
	}
	f := fileConfig{
		Job:              c.Job,
		ServerErrorTypes: append([]string(nil), c.ServerErrorTypes...),
		Thresholds: fileThresholds{
			WaitingPerSlot:   tiers(c.WaitingPerSlot),
			KVCacheUsage:     tiers(c.KVCacheUsage),
			EventsLostRatio:  tiers(c.EventsLostRatio),
			DecodeErrorRatio: tiers(c.DecodeErrorRatio),
			LastEventAge:     tiers(c.LastEventAge),
			NoDaemon:         fileWarningFor{durString(c.NoDaemon.For)},
			TargetDown:       fileCriticalFor{durString(c.TargetDown.For)},
			TargetAbsent:     fileCriticalFor{durString(c.TargetAbsent.For)},
		},
	}
	if c.SpecAcceptance.For != 0 {
		f.Thresholds.SpecAcceptance = fileSpec{fptr(c.SpecAcceptance.Threshold), durString(c.SpecAcceptance.For), fptr(c.SpecMinDraftRate)}
	}
	if c.PrefixCacheDrop.For != 0 {
		f.Thresholds.PrefixCache = filePrefixCache{fptr(c.PrefixCacheDrop.Threshold), durString(c.PrefixCacheDrop.For),
			fptr(c.PrefixCacheMinBaseline), fptr(c.PrefixCacheMinQueryRate)}
	}
	for _, o := range c.Objectives {
		fo := fileObjective{
			Name: o.Name, Description: o.Description, SLI: o.SLI, Histogram: o.Histogram,
			Objective: fptr(o.Objective), Window: durString(o.Window),
		}
		if o.SLI == SLILatency {
			fo.Target = num(o.Target) + "s"
		}
		if len(o.Selector) > 0 {
			fo.Selector = map[string]string{}
			for _, kv := range o.Selector {
				fo.Selector[kv.Key] = kv.Value
			}
		}
		f.Objectives = append(f.Objectives, fo)
	}
	return f
}

// config converts the decoded file, naming the key of a missing value or a
// malformed duration.
func (f *fileConfig) config() (Config, error) {
	c := Config{Thresholds: Thresholds{Job: f.Job, ServerErrorTypes: f.ServerErrorTypes}}
	dur := func(key, s string) (time.Duration, error) {
		if s == "" {
			return 0, fmt.Errorf("%s: missing", key)
		}
		d, err := ParsePromDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", key, err)
		}
		return d, nil
	}
	val := func(key string, v *float64) (float64, error) {
		if v == nil {
			return 0, fmt.Errorf("%s: missing", key)
		}
		return *v, nil
	}
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	tier := func(key string, v *float64, d string) Tier {
		var t Tier
		var err error
		t.Threshold, err = val(key, v)
		keep(err)
		t.For, err = dur(key+"_for", d)
		keep(err)
		return t
	}
	tiers := func(name string, ft fileTiers) Tiers {
		k := "thresholds." + name + "."
		return Tiers{Warning: tier(k+"warning", ft.Warning, ft.WarningFor), Critical: tier(k+"critical", ft.Critical, ft.CriticalFor)}
	}
	forOnly := func(key, s string) Tier {
		d, err := dur(key, s)
		keep(err)
		return Tier{For: d}
	}
	th := &f.Thresholds
	c.WaitingPerSlot = tiers("waiting_per_slot", th.WaitingPerSlot)
	c.KVCacheUsage = tiers("kv_cache_usage", th.KVCacheUsage)
	c.SpecAcceptance = tier("thresholds.spec_acceptance.warning", th.SpecAcceptance.Warning, th.SpecAcceptance.WarningFor)
	rate, err := val("thresholds.spec_acceptance.min_draft_rate", th.SpecAcceptance.MinDraftRate)
	keep(err)
	c.SpecMinDraftRate = rate
	c.PrefixCacheDrop = tier("thresholds.prefix_cache_collapse.warning", th.PrefixCache.Warning, th.PrefixCache.WarningFor)
	c.PrefixCacheMinBaseline, err = val("thresholds.prefix_cache_collapse.min_baseline", th.PrefixCache.MinBaseline)
	keep(err)
	c.PrefixCacheMinQueryRate, err = val("thresholds.prefix_cache_collapse.min_query_rate", th.PrefixCache.MinQueryRate)
	keep(err)
	c.EventsLostRatio = tiers("events_lost_ratio", th.EventsLostRatio)
	c.DecodeErrorRatio = tiers("decode_error_ratio", th.DecodeErrorRatio)
	c.LastEventAge = tiers("last_event_age", th.LastEventAge)
	c.NoDaemon = forOnly("thresholds.no_daemon.warning_for", th.NoDaemon.WarningFor)
	c.TargetDown = forOnly("thresholds.target_down.critical_for", th.TargetDown.CriticalFor)
	c.TargetAbsent = forOnly("thresholds.target_absent.critical_for", th.TargetAbsent.CriticalFor)
	if firstErr != nil {
		return Config{}, firstErr
	}

	for i, fo := range f.Objectives {
		where := fmt.Sprintf("objective[%d]", i)
		if fo.Name != "" {
			where = fmt.Sprintf("objective %q", fo.Name)
		}
		o := Objective{Name: fo.Name, Description: fo.Description, SLI: fo.SLI, Histogram: fo.Histogram}
		if fo.Objective == nil {
			return Config{}, fmt.Errorf("%s: objective: missing (a percentage, e.g. 99.5)", where)
		}
		o.Objective = *fo.Objective
		if fo.Window == "" {
			return Config{}, fmt.Errorf("%s: window: missing (e.g. \"30d\")", where)
		}
		if o.Window, err = ParsePromDuration(fo.Window); err != nil {
			return Config{}, fmt.Errorf("%s: window: %w", where, err)
		}
		if fo.Target != "" {
			d, err := time.ParseDuration(fo.Target)
			if err != nil {
				return Config{}, fmt.Errorf("%s: target: %q is not a duration (e.g. \"1s\", \"50ms\")", where, fo.Target)
			}
			o.Target = d.Seconds()
			o.targetSet = true
		}
		keys := make([]string, 0, len(fo.Selector))
		for k := range fo.Selector {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			o.Selector = append(o.Selector, KV{k, fo.Selector[k]})
		}
		c.Objectives = append(c.Objectives, o)
	}
	return c, nil
}

// promDuration is a Prometheus duration: units y, w, d, h, m, s, ms, largest
// first, each at most once.
var promDuration = regexp.MustCompile(`^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$`)

// ParsePromDuration parses a Prometheus duration such as "30d", "1h30m" or
// "500ms" (a year is 365 days). Zero is an error: every duration of the
// file must be positive.
func ParsePromDuration(s string) (time.Duration, error) {
	m := promDuration.FindStringSubmatch(s)
	if s == "" || m == nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. \"5m\", \"1h\", \"30d\")", s)
	}
	units := []time.Duration{365 * 24 * time.Hour, 7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second, time.Millisecond}
	var d time.Duration
	for i, u := range units {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64(100*365*24*time.Hour/u) {
			return 0, fmt.Errorf("%q is too long", s)
		}
		d += time.Duration(n) * u
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: must be positive", s)
	}
	return d, nil
}

// labelNames returns the Prometheus label names of family id.
func labelNames(id string) []string {
	var out []string
	for _, a := range schema.Lookup(id).AllAttrs() {
		out = append(out, schema.PromLabel(a.Key))
	}
	return out
}

// DefaultSLOText returns the committed alerts/slo.toml.
func DefaultSLOText() []byte { return append([]byte(nil), defaultSLOText...) }
