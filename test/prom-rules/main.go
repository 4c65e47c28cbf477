// prom-rules: floodgate's alert rules through Prometheus' own code, for the tests.
//
//	prom-rules check <file>...
//	    Parses each file with Prometheus' rule parser (model/rulefmt, the parser Prometheus and
//	    promtool load rule files with, expressions included). A file may be a rule file or a
//	    PrometheusRule object (its spec is the rule file). Prints {"errors": [...]} as JSON.
//
//	prom-rules eval <rules file> <seconds>=<scrape file>...
//	    Loads each scrape (Prometheus text exposition, as /metrics served it) as samples at its
//	    time, into a Prometheus TSDB, and evaluates every alert's expression with Prometheus'
//	    PromQL engine at the last scrape's time. Prints {"alerts": {"<name>": <series>}}: the
//	    number of series the expression returns (above 0: the alert is pending, then firing once
//	    its `for` has passed).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/teststorage"
	"gopkg.in/yaml.v3"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "prom-rules: "+format+"\n", args...)
	os.Exit(2)
}

// ruleFileText returns the rule file inside a PrometheusRule object, or the text as it is.
func ruleFileText(text []byte) []byte {
	var object struct {
		Kind string    `yaml:"kind"`
		Spec yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(text, &object); err != nil || object.Kind != "PrometheusRule" {
		return text
	}
	out, err := yaml.Marshal(&object.Spec)
	if err != nil {
		fail("re-encoding the spec: %v", err)
	}
	return out
}

func parseRules(path string) (*rulefmt.RuleGroups, []error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, []error{err}
	}
	return rulefmt.Parse(ruleFileText(text), false)
}

func check(paths []string) {
	errs := []string{}
	for _, path := range paths {
		_, found := parseRules(path)
		for _, e := range found {
			errs = append(errs, fmt.Sprintf("%s: %v", path, e))
		}
	}
	out, _ := json.Marshal(map[string]any{"errors": errs})
	fmt.Println(string(out))
}

// appendFamily adds one metric family's samples as Prometheus would ingest them from a scrape.
func appendFamily(app storage.Appender, mf *dto.MetricFamily, ts int64, target map[string]string) error {
	add := func(name string, m *dto.Metric, extra map[string]string, value float64) error {
		set := map[string]string{"__name__": name}
		for k, v := range target {
			set[k] = v
		}
		for _, lp := range m.GetLabel() {
			set[lp.GetName()] = lp.GetValue()
		}
		for k, v := range extra {
			set[k] = v
		}
		_, err := app.Append(0, labels.FromMap(set), ts, value)
		return err
	}
	format := func(f float64) string {
		if math.IsInf(f, 1) {
			return "+Inf"
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	name := mf.GetName()
	for _, m := range mf.GetMetric() {
		var err error
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			err = add(name, m, nil, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			err = add(name, m, nil, m.GetGauge().GetValue())
		case dto.MetricType_UNTYPED:
			err = add(name, m, nil, m.GetUntyped().GetValue())
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			for _, b := range h.GetBucket() {
				if err = add(name+"_bucket", m, map[string]string{"le": format(b.GetUpperBound())}, float64(b.GetCumulativeCount())); err != nil {
					return err
				}
			}
			if err = add(name+"_sum", m, nil, h.GetSampleSum()); err == nil {
				err = add(name+"_count", m, nil, float64(h.GetSampleCount()))
			}
		case dto.MetricType_SUMMARY:
			s := m.GetSummary()
			for _, q := range s.GetQuantile() {
				if err = add(name, m, map[string]string{"quantile": format(q.GetQuantile())}, q.GetValue()); err != nil {
					return err
				}
			}
			if err = add(name+"_sum", m, nil, s.GetSampleSum()); err == nil {
				err = add(name+"_count", m, nil, float64(s.GetSampleCount()))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

type scrape struct {
	seconds float64
	path    string
}

func eval(rulesPath string, args []string) {
	groups, errs := parseRules(rulesPath)
	if len(errs) > 0 {
		fail("%s: %v", rulesPath, errs)
	}
	scrapes := []scrape{}
	for _, arg := range args {
		at, path, ok := strings.Cut(arg, "=")
		seconds, err := strconv.ParseFloat(at, 64)
		if !ok || err != nil {
			fail("not <seconds>=<file>: %s", arg)
		}
		scrapes = append(scrapes, scrape{seconds, path})
	}
	sort.Slice(scrapes, func(i, j int) bool { return scrapes[i].seconds < scrapes[j].seconds })
	if len(scrapes) == 0 {
		fail("no scrapes")
	}
	db, err := teststorage.NewWithError()
	if err != nil {
		fail("storage: %v", err)
	}
	defer db.Close()
	// An arbitrary epoch: the scrapes' own times are offsets from it.
	base := time.Unix(1_700_000_000, 0)
	target := map[string]string{"job": "floodgate", "instance": "floodgate-test:9090"}
	for _, s := range scrapes {
		text, err := os.ReadFile(s.path)
		if err != nil {
			fail("%v", err)
		}
		var parser expfmt.TextParser
		families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
		if err != nil {
			fail("%s: %v", s.path, err)
		}
		app := db.Appender(context.Background())
		ts := base.Add(time.Duration(s.seconds * float64(time.Second))).UnixMilli()
		for _, mf := range families {
			if err := appendFamily(app, mf, ts, target); err != nil {
				fail("%s: %s: %v", s.path, mf.GetName(), err)
			}
		}
		if err := app.Commit(); err != nil {
			fail("commit: %v", err)
		}
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	at := base.Add(time.Duration(scrapes[len(scrapes)-1].seconds * float64(time.Second)))
	alerts := map[string]int{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			q, err := engine.NewInstantQuery(context.Background(), db, nil, r.Expr, at)
			if err != nil {
				fail("%s: %v", r.Alert, err)
			}
			res := q.Exec(context.Background())
			if res.Err != nil {
				fail("%s: %v", r.Alert, res.Err)
			}
			vector, err := res.Vector()
			if err != nil {
				fail("%s: not a vector: %v", r.Alert, err)
			}
			alerts[r.Alert] = len(vector)
			q.Close()
		}
	}
	out, _ := json.Marshal(map[string]any{"alerts": alerts})
	fmt.Println(string(out))
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: prom-rules check <file>... | prom-rules eval <rules> <seconds>=<scrape>...")
	}
	switch os.Args[1] {
	case "check":
		check(os.Args[2:])
	case "eval":
		eval(os.Args[2], os.Args[3:])
	default:
		fail("unknown command %s", os.Args[1])
	}
}
