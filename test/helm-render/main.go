// Renders a Helm chart with Helm's own code (helm.sh/helm/v3: the chart loader, the values
// coalescing and values.schema.json validation, the template engine in strict mode, and the
// chart linter), for floodgate's tests: no helm binary and no cluster needed.
//
//	helm-render -chart deploy/helm/floodgate -name fg -namespace rl [-set k=v ...] < values.json
//
// The values to set (as `helm install -f` would take them, in JSON) are read from stdin; each
// -set is then applied as `helm install --set` applies it (Helm's strvals parser: `true` is a
// boolean, a comma separates two settings unless escaped). The
// answer on stdout is JSON: {"manifests": {"<chart>/templates/<file>": "<yaml>"}, "notes":
// "<NOTES.txt>", "lint": [{"severity": "WARNING", "path": "...", "message": "..."}]}.
// A chart that does not render (a `fail`, a schema violation, a missing value) exits 1 with
// Helm's error on stderr.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/strvals"
)

// setFlags collects repeated -set flags, in order.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

type lintMessage struct {
	Severity string `json:"severity"`
	Path     string `json:"path"`
	Message  string `json:"message"`
}

type answer struct {
	Manifests map[string]string `json:"manifests"`
	Notes     string            `json:"notes"`
	Lint      []lintMessage     `json:"lint"`
}

var severities = map[int]string{
	support.UnknownSev: "UNKNOWN",
	support.InfoSev:    "INFO",
	support.WarningSev: "WARNING",
	support.ErrorSev:   "ERROR",
}

func run() error {
	chartDir := flag.String("chart", "", "the chart directory")
	name := flag.String("name", "floodgate", "the release name")
	namespace := flag.String("namespace", "default", "the release namespace")
	var sets setFlags
	flag.Var(&sets, "set", "a --set argument (repeatable)")
	flag.Parse()

	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	values := map[string]interface{}{}
	if len(strings.TrimSpace(string(input))) > 0 {
		if err := json.Unmarshal(input, &values); err != nil {
			return fmt.Errorf("values on stdin: %w", err)
		}
	}
	for _, set := range sets {
		if err := strvals.ParseInto(set, values); err != nil {
			return fmt.Errorf("failed parsing --set data: %w", err)
		}
	}

	chrt, err := loader.Load(*chartDir)
	if err != nil {
		return err
	}
	// As `helm template` without --kube-version does (pkg/action, renderResources): the chart's
	// kubeVersion constraint against Helm's offline default Kubernetes version (v1.20.0 in a
	// Helm built without the release ldflags). A constraint that refuses it refuses GitOps and
	// CI steps that run exactly that command.
	capabilities := chartutil.DefaultCapabilities
	if chrt.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, capabilities.KubeVersion.String()) {
		return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", chrt.Metadata.KubeVersion, capabilities.KubeVersion.String())
	}
	// As `helm install`/`helm template` do: coalesce with values.yaml, validate against
	// values.schema.json, then render every template.
	options := chartutil.ReleaseOptions{Name: *name, Namespace: *namespace, Revision: 1, IsInstall: true}
	renderValues, err := chartutil.ToRenderValues(chrt, values, options, capabilities)
	if err != nil {
		return err
	}
	// Strict: a template that reads a value values.yaml does not define fails instead of
	// rendering an empty string.
	rendered, err := engine.Engine{Strict: true}.Render(chrt, renderValues)
	if err != nil {
		return err
	}
	out := answer{Manifests: map[string]string{}, Lint: []lintMessage{}}
	for file, text := range rendered {
		switch {
		case strings.HasSuffix(file, "NOTES.txt"):
			out.Notes = text
		case strings.HasPrefix(path.Base(file), "_"):
			// helpers only
		default:
			out.Manifests[file] = text
		}
	}

	// `helm lint` with the same values.
	linter := lint.AllWithKubeVersion(*chartDir, values, *namespace, nil)
	for _, m := range linter.Messages {
		out.Lint = append(out.Lint, lintMessage{Severity: severities[m.Severity], Path: m.Path, Message: m.Err.Error()})
	}

	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", " ")
	return encoder.Encode(out)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
