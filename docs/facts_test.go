package docs

// The facts the documentation states and the code owns: flags and their
// defaults, metrics, status reasons, worker counts and the contract's
// tables. Each test reads the doc's table and the code's value and names
// both when they differ, so that a change on one side fails `make test`
// until the other follows.

import (
	"go/ast"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

// docDefault reports whether a table cell states the default a flag
// registers; the cell's first code span is the value (`10s`, `:8080`).
func docDefault(f codeFlag, cell string) bool {
	if !f.known {
		return true // computed at run time: the prose describes it
	}
	sp := spans(cell)
	switch {
	case f.def.kind == kindVersion:
		return strings.Contains(cell, "version")
	case f.def.kind == kindBool && f.def.text == "false" && len(sp) == 0:
		return true // a switch such as --version: the cell says what it does
	case f.def.kind == kindString && f.def.text == "":
		// Empty: the cell says what empty means ("off", "all namespaces",
		// "in-cluster") or names the variable used instead.
		return len(sp) == 0 || strings.HasPrefix(sp[0], "$")
	case len(sp) == 0:
		return false
	case f.def.kind == kindDuration:
		d, err := time.ParseDuration(sp[0])
		return err == nil && int64(d) == f.def.n
	}
	return sp[0] == f.def.String()
}

// flagRows maps the flags of a doc table's first column ("`--name`",
// "`preflight --name`", "`--version` / `version`") to their rows.
func flagRows(t *testing.T, d doc, where string, tb table) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	for _, row := range tb.rows {
		sp := spans(row[0])
		if len(sp) == 0 {
			t.Errorf("%s, %s: the row %q names no flag", d.name, where, row[0])
			continue
		}
		cmd, name, _ := strings.Cut(sp[0], "--")
		rows[strings.TrimSpace(strings.TrimSpace(cmd)+" "+name)] = row
	}
	return rows
}

// checkFlags compares a doc's flag table with the flags a command
// registers: every flag documented, no documented flag missing, every
// default as the code has it.
func checkFlags(t *testing.T, d doc, where, codeDir string, tb table, defaultCol string, flags []codeFlag) {
	t.Helper()
	rows := flagRows(t, d, where, tb)
	col := tb.col(defaultCol)
	if col < 0 {
		t.Fatalf("%s, %s: the flag table has no column %q", d.name, where, defaultCol)
	}
	registered := map[string]bool{}
	for _, f := range flags {
		registered[f.key()] = true
		row, ok := rows[f.key()]
		if !ok {
			t.Errorf("%s, %s: the flag --%s (%s) is not documented", d.name, where, f.key(), codeDir)
			continue
		}
		if !docDefault(f, row[col]) {
			t.Errorf("%s, %s: --%s has the default %s, but the code (%s) has %q", d.name, where, f.key(), row[col], codeDir, f.def.String())
		}
	}
	for key := range rows {
		if !registered[key] {
			t.Errorf("%s, %s: documents the flag --%s, which %s does not register", d.name, where, key, codeDir)
		}
	}
}

// The controllers' flag table of contract.md is what the runner registers
// (controllers/internal/runner) and what the operator passes
// (operator/internal/render).
func TestControllerFlagsMatchTheCode(t *testing.T) {
	d := readDoc(t, "contract.md")
	const where = `"Flags"`
	tb := findTable(t, d, d.section(t, "Flags"), where, "flag", "passed by the operator", "runner default")
	runner := parsePackage(t, "controllers/internal/runner")
	checkFlags(t, d, where, runner.dir, tb, "runner default", runner.flags(t))

	// What render passes: contract.Flag(name, value) calls.
	render := parsePackage(t, "operator/internal/render")
	passed := map[string]codeFlag{}
	for _, f := range render.files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || calleeName(call) != "contract.Flag" || len(call.Args) != 2 {
				return true
			}
			name, ok := render.eval(call.Args[0])
			if !ok {
				t.Fatalf("%s: cannot read the name of a flag the operator passes", render.dir)
			}
			v, known := render.eval(call.Args[1])
			passed[name.text] = codeFlag{name: name.text, def: v, known: known}
			return true
		})
	}
	col := tb.col("passed by the operator")
	rows := flagRows(t, d, where, tb)
	// The global rate limits' flags are the ratelimit controller's and the
	// rate-limit service's own (contract OwnReserved), in their own table.
	const globalWhere = `"Global rate limit flags"`
	global := findTable(t, d, d.section(t, "Global rate limit flags"), globalWhere, "flag", "binary", "passed by the operator")
	globalRows := flagRows(t, d, globalWhere, global)
	for key, row := range globalRows {
		f, isPassed := passed[key]
		binary := spans(row[global.col("binary")])
		owned := len(binary) == 1 && slices.ContainsFunc(contract.Controllers, func(c contract.Controller) bool {
			return c.Binary() == binary[0] && slices.Contains(c.OwnReserved, key)
		})
		switch {
		case !owned:
			t.Errorf("%s, %s: --%s is not in the OwnReserved flags of %q (internal/contract)", d.name, globalWhere, key, binary)
		case !isPassed:
			t.Errorf("%s, %s: says the operator passes --%s, but %s does not", d.name, globalWhere, key, render.dir)
		case !docDefault(f, row[global.col("passed by the operator")]):
			t.Errorf("%s, %s: says the operator passes --%s=%s, but %s passes %q", d.name, globalWhere, key, row[global.col("passed by the operator")], render.dir, f.def.String())
		}
		delete(passed, key)
	}
	for key, row := range rows {
		f, isPassed := passed[key]
		switch {
		case !isPassed && row[col] != "–":
			t.Errorf("%s, %s: says the operator passes --%s (%s), but %s does not", d.name, where, key, row[col], render.dir)
		case isPassed && row[col] == "–":
			t.Errorf("%s, %s: says the operator does not pass --%s, but %s passes %q", d.name, where, key, render.dir, f.def.String())
		case isPassed && !docDefault(f, row[col]):
			t.Errorf("%s, %s: says the operator passes --%s=%s, but %s passes %q", d.name, where, key, row[col], render.dir, f.def.String())
		}
	}
	for key := range passed {
		if _, ok := rows[key]; !ok {
			t.Errorf("%s, %s: the operator passes --%s (%s), which is not documented", d.name, where, key, render.dir)
		}
	}
}

// The operator's flag table of operations.md is what portico-operator
// registers (operator/internal/cli); its log flags (controller-runtime's
// --zap-*) are left out of both.
func TestOperatorFlagsMatchTheCode(t *testing.T) {
	d := readDoc(t, "operations.md")
	const where = `"The operator's flags"`
	tb := findTable(t, d, d.section(t, "Install and upgrade"), where, "flag", "default", "meaning")
	cli := parsePackage(t, "operator/internal/cli")
	checkFlags(t, d, where, cli.dir, tb, "default", cli.flags(t))
}

// codeMetric is one Prometheus collector Portico defines.
type codeMetric struct {
	name, typ, binary string
	labels            []string
	dir               string
}

// productDirs are the directories of the product's Go code.
var productDirs = []string{"api", "internal", "operator", "controllers"}

// goDirs returns every directory under the product's directories that holds
// Go files, relative to the repository root.
func goDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, top := range productDirs {
		err := filepath.WalkDir(filepath.Join("..", top), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && e.Name() == "testdata" {
				return filepath.SkipDir
			}
			if !e.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				rel, _ := filepath.Rel("..", filepath.Dir(p))
				if dir := filepath.ToSlash(rel); !slices.Contains(dirs, dir) {
					dirs = append(dirs, dir)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// binaryOf names the binary a package's metric is served by, as the
// metrics table does.
func binaryOf(dir string) string {
	switch parts := strings.Split(dir, "/"); {
	case parts[0] == "operator":
		return "operator"
	case parts[0] == "controllers" && parts[1] == "internal":
		return "every controller"
	case parts[0] == "controllers":
		return parts[1] + " controller"
	}
	return dir
}

// productMetrics returns the collectors defined with prometheus.New* in the
// product's code, and every string literal of that code.
func productMetrics(t *testing.T) ([]codeMetric, map[string]bool) {
	t.Helper()
	var metrics []codeMetric
	literals := map[string]bool{}
	for _, dir := range goDirs(t) {
		p := parsePackage(t, dir)
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok {
					if v, ok := p.eval(lit); ok && v.kind == kindString {
						literals[v.text] = true
					}
				}
				call, ok := n.(*ast.CallExpr)
				if !ok || !strings.HasPrefix(calleeName(call), "prometheus.New") || len(call.Args) == 0 {
					return true
				}
				opts, ok := call.Args[0].(*ast.CompositeLit)
				if !ok {
					return true
				}
				sel, ok := opts.Type.(*ast.SelectorExpr)
				if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
					return true
				}
				m := codeMetric{typ: strings.ToLower(strings.TrimSuffix(sel.Sel.Name, "Opts")), binary: binaryOf(dir), dir: dir}
				var parts []string
				for _, field := range []string{"Namespace", "Subsystem", "Name"} {
					for _, elt := range opts.Elts {
						kv, ok := elt.(*ast.KeyValueExpr)
						if !ok || kv.Key.(*ast.Ident).Name != field {
							continue
						}
						v, ok := p.eval(kv.Value)
						if !ok {
							t.Fatalf("%s: cannot read the %s of a metric", dir, field)
						}
						if v.text != "" {
							parts = append(parts, v.text)
						}
					}
				}
				m.name = strings.Join(parts, "_")
				if len(call.Args) > 1 {
					if labels, ok := call.Args[1].(*ast.CompositeLit); ok {
						for _, l := range labels.Elts {
							v, ok := p.eval(l)
							if !ok {
								t.Fatalf("%s: cannot read a label of %s", dir, m.name)
							}
							m.labels = append(m.labels, v.text)
						}
					}
				}
				metrics = append(metrics, m)
				return true
			})
		}
	}
	return metrics, literals
}

var porticoName = regexp.MustCompile(`\bportico_[a-z0-9_]+`)

// Every portico_* metric Portico defines is in the metrics table of
// operations.md with its type, labels and binary; every portico_* name the
// docs mention is one the code has.
func TestMetricsMatchTheCode(t *testing.T) {
	metrics, literals := productMetrics(t)
	d := readDoc(t, "operations.md")
	const where = `"Portico's metrics"`
	tb := findTable(t, d, d.section(t, "Portico's metrics"), where, "metric", "type", "labels", "binary")
	rows := map[string][]string{}
	for _, row := range tb.rows {
		if sp := spans(row[0]); len(sp) > 0 {
			rows[sp[0]] = row
		}
	}
	defined := map[string]bool{}
	porticos := 0
	for _, m := range metrics {
		defined[m.name] = true
		if !strings.HasPrefix(m.name, "portico_") {
			continue
		}
		porticos++
		row, ok := rows[m.name]
		if !ok {
			t.Errorf("%s, %s: the metric %s (%s) is not documented", d.name, where, m.name, m.dir)
			continue
		}
		if row[1] != m.typ {
			t.Errorf("%s, %s: %s is a %s, but the code (%s) makes it a %s", d.name, where, m.name, row[1], m.dir, m.typ)
		}
		if labels := spans(withoutParentheses(row[2])); !slices.Equal(labels, m.labels) {
			t.Errorf("%s, %s: %s has the labels %q, but the code (%s) has %q", d.name, where, m.name, labels, m.dir, m.labels)
		}
		if row[3] != m.binary && row[3]+" controller" != m.binary {
			t.Errorf("%s, %s: %s is served by %q, but the code (%s) is the %s's", d.name, where, m.name, row[3], m.dir, m.binary)
		}
	}
	if porticos == 0 {
		t.Fatal("found no portico_* metric in the code: the test no longer finds the definitions")
	}
	// The rate-limit service's metrics are defined in its package, which
	// arrives from its own branch: until its main.go is in the tree, a row
	// served by it documents what it will export (the alerts read them).
	_, serviceErr := os.Stat(filepath.Join("..", "controllers", "ratelimitservice", "main.go"))
	for name, row := range rows {
		if !defined[name] && (serviceErr == nil || row[3] != "ratelimitservice") {
			t.Errorf("%s, %s: documents the metric %s, which the code does not define", d.name, where, name)
		}
		if !defined[name] {
			defined[name] = true // a name the other docs may use
		}
	}
	for _, path := range allDocs(t) {
		other := readDoc(t, path)
		for _, name := range porticoName.FindAllString(other.text, -1) {
			if !defined[name] && !literals[name] {
				t.Errorf("%s: names %s, which is neither a metric nor any other name in the code", other.name, name)
			}
		}
	}
}

// allDocs lists README.md and every page of docs/.
func allDocs(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	return append(pages, "../README.md")
}

// Every reason constant of the APIs (and of the quarantine guard) is in
// the "Status reasons" section of operations.md, under a heading about its
// resource, and every reason those tables list is a constant.
func TestStatusReasonsMatchTheCode(t *testing.T) {
	isReason := func(name, _ string) bool { return strings.HasPrefix(name, "Reason") }
	type source struct {
		dir      string
		reasons  map[string]string // constant name → value
		headings []string          // subsections that document them
	}
	sources := []*source{
		{dir: "api/operator/v1alpha1", headings: []string{"APIGateway"}},
		{dir: "api/gateway/v1alpha1", headings: []string{"APIRule", "RateLimit"}},
		{dir: "controllers/internal/quarantine", headings: []string{"Quarantine"}},
	}
	for _, s := range sources {
		keep := isReason
		if s.dir == "controllers/internal/quarantine" {
			keep = func(_, typ string) bool { return typ == "Reason" }
		}
		s.reasons = parsePackage(t, s.dir).stringConsts(t, keep)
		if len(s.reasons) == 0 {
			t.Fatalf("found no reason constant in %s", s.dir)
		}
	}
	// The parse reads what the packages export.
	for name, want := range map[string]string{
		"ReasonApplyFailed": operatorv1alpha1.ReasonApplyFailed, "ReasonCRDNotFound": operatorv1alpha1.ReasonCRDNotFound,
		"ReasonGatewayNotProgrammed": operatorv1alpha1.ReasonGatewayNotProgrammed,
	} {
		if got := sources[0].reasons[name]; got != want {
			t.Fatalf("read %s = %q from %s, but the package has %q", name, got, sources[0].dir, want)
		}
	}
	if got := sources[1].reasons["ReasonRouteNotAccepted"]; got != gatewayv1alpha1.ReasonRouteNotAccepted {
		t.Fatalf("read ReasonRouteNotAccepted = %q from %s, but the package has %q", got, sources[1].dir, gatewayv1alpha1.ReasonRouteNotAccepted)
	}

	d := readDoc(t, "operations.md")
	subs := subsections(d.section(t, "Status reasons"))
	documented := map[*source]string{} // every subsection's text, per source
	for title, text := range subs {
		var src *source
		for _, s := range sources {
			for _, h := range s.headings {
				if strings.HasPrefix(title, h) {
					src = s
				}
			}
		}
		if src == nil {
			t.Errorf("%s, Status reasons: the test does not know which package the section %q documents", d.name, title)
			continue
		}
		documented[src] += text
		values := map[string]bool{}
		for _, v := range src.reasons {
			values[v] = true
		}
		for _, tb := range tables(text) {
			for _, row := range tb.rows {
				var listed []string
				if c := tb.col("reason"); c >= 0 {
					if sp := spans(row[c]); len(sp) > 0 {
						listed = sp[:1]
					}
				}
				if c := tb.col("reasons"); c >= 0 {
					listed = spans(withoutParentheses(row[c]))
				}
				for _, r := range listed {
					if !values[r] {
						t.Errorf("%s, %q: lists the reason %s, which is no reason constant of %s", d.name, title, r, src.dir)
					}
				}
			}
		}
	}
	for _, s := range sources {
		written := spans(documented[s])
		for name, v := range s.reasons {
			if !slices.Contains(written, v) {
				t.Errorf("%s, Status reasons: the reason %s (%s.%s) is not documented under %q", d.name, v, s.dir, name, s.headings)
			}
		}
	}
}

// workerCounts returns how many workers each controller-runtime controller
// of the given packages runs: the MaxConcurrentReconciles of the
// controller.Options next to its Named(...) call, else controller-runtime's
// default of 1.
func workerCounts(t *testing.T, dirs ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, dir := range dirs {
		p := parsePackage(t, dir)
		for _, f := range p.files {
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				name, workers := "", 1
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.CallExpr:
						if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Named" && len(n.Args) == 1 {
							if v, ok := p.eval(n.Args[0]); ok {
								name = v.text
							}
						}
					case *ast.CompositeLit:
						if !isSelector(n.Type, "controller", "Options") {
							return true
						}
						for _, elt := range n.Elts {
							if kv, ok := elt.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "MaxConcurrentReconciles" {
								v, ok := p.eval(kv.Value)
								if !ok || v.kind != kindInt {
									t.Fatalf("%s: cannot read MaxConcurrentReconciles", dir)
								}
								workers = int(v.n)
							}
						}
					}
					return true
				})
				if name != "" {
					out[name] = workers
				}
			}
		}
	}
	// A manager-wide default would change every controller without an
	// option of its own.
	for _, dir := range []string{"controllers/internal/runner", "operator/internal/cli"} {
		for _, f := range parsePackage(t, dir).files {
			ast.Inspect(f, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && (id.Name == "MaxConcurrentReconciles" || id.Name == "GroupKindConcurrency") {
					t.Fatalf("%s sets %s for the whole manager: teach this test about it", dir, id.Name)
				}
				return true
			})
		}
	}
	return out
}

var (
	workersInCell   = regexp.MustCompile(`\b(\d+) workers?\b`)
	operatorWorkers = regexp.MustCompile(`with (one|\d+) workers?\b`)
	workersList     = regexp.MustCompile(`workers: ([^)]*)\)`)
)

func atoi(s string) int {
	if s == "one" {
		return 1
	}
	n, _ := strconv.Atoi(s)
	return n
}

// The worker counts architecture.md and operations.md state are the
// controllers' (the operator's reconciler is "apigateway").
func TestWorkerCountsMatchTheCode(t *testing.T) {
	code := workerCounts(t, "operator/internal/reconciler",
		"controllers/apirule/internal/controller", "controllers/ratelimit/internal/controller", "controllers/gateway/internal/controller")
	// The operator's own controllers: its control loop and the keeper of its
	// own NetworkPolicy.
	operatorControllers := len(workerCounts(t, "operator/internal/reconciler"))
	for _, name := range []string{"apigateway", "apirule", "ratelimit", "gateway"} {
		if _, ok := code[name]; !ok {
			t.Fatalf("found no controller named %q in the code (found %v)", name, code)
		}
	}
	check := func(d doc, where, name string, stated int) {
		if stated != code[name] {
			t.Errorf("%s, %s: says the %s controller runs %d workers, but the code has %d", d.name, where, name, stated, code[name])
		}
	}

	arch := readDoc(t, "architecture.md")
	loop := arch.section(t, "The operator's control loop")
	if m := operatorWorkers.FindStringSubmatch(loop); m == nil {
		t.Errorf("%s, \"The operator's control loop\": states no worker count", arch.name)
	} else {
		check(arch, `"The operator's control loop"`, "apigateway", atoi(m[1]))
	}
	tb := findTable(t, arch, arch.section(t, "The gateway controllers"), `"The gateway controllers"`, "controller", "reconcile key")
	seen := 0
	for _, row := range tb.rows {
		m := workersInCell.FindStringSubmatch(row[1])
		if m == nil {
			t.Errorf("%s, \"The gateway controllers\": the %s row states no worker count", arch.name, row[0])
			continue
		}
		seen++
		check(arch, `"The gateway controllers"`, row[0], atoi(m[1]))
	}
	if seen != len(code)-operatorControllers {
		t.Errorf("%s, \"The gateway controllers\": states the workers of %d controllers, the code has %d", arch.name, seen, len(code)-operatorControllers)
	}

	ops := readDoc(t, "operations.md")
	m := workersList.FindStringSubmatch(ops.section(t, "Standard metrics"))
	if m == nil {
		t.Fatalf("%s, \"Standard metrics\": states no worker counts (\"workers: operator 1, ...\")", ops.name)
	}
	stated := 0
	for _, item := range strings.Split(m[1], ",") {
		name, n, _ := strings.Cut(strings.TrimSpace(item), " ")
		if name == "operator" {
			name = "apigateway"
		}
		if _, ok := code[name]; !ok {
			t.Errorf("%s, \"Standard metrics\": states the workers of %q, which is no controller", ops.name, name)
			continue
		}
		stated++
		check(ops, `"Standard metrics"`, name, atoi(n))
	}
	if stated != len(code) {
		t.Errorf("%s, \"Standard metrics\": states the workers of %d controllers, the code has %d", ops.name, stated, len(code))
	}
}

// The Controllers and CRDs tables of contract.md are internal/contract's.
func TestContractTablesMatchTheCode(t *testing.T) {
	d := readDoc(t, "contract.md")
	names := d.section(t, "Controllers")
	ctl := findTable(t, d, names, `"Controllers"`, "name")
	crds := findTable(t, d, d.section(t, "CRDs"), `"CRDs"`, "controller", "required (name/version)", "optional (name/version)")
	rowOf := func(tb table, name string) []string {
		for _, row := range tb.rows {
			if sp := spans(row[0]); len(sp) > 0 && sp[0] == name {
				return row
			}
		}
		return nil
	}
	crdSpans := func(cell string) []string {
		var out []string
		for _, s := range spans(cell) {
			if strings.Contains(s, ".") && strings.Contains(s, "/") {
				out = append(out, s)
			}
		}
		slices.Sort(out)
		return out
	}
	crdStrings := func(list []contract.CRD) []string {
		var out []string
		for _, c := range list {
			out = append(out, c.String())
		}
		slices.Sort(out)
		return out
	}
	for _, c := range contract.Controllers {
		name := string(c.Name)
		if row := rowOf(ctl, name); row == nil {
			t.Errorf("%s, \"Controllers\": the controller %s (contract.Controllers) is missing", d.name, name)
		} else if got, want := spans(strings.Join(row[1:4], " ")), []string{c.Binary(), c.RelatedImageEnv(), c.LeaderElectionID()}; !slices.Equal(got, want) {
			t.Errorf("%s, \"Controllers\": the %s row says %q, but internal/contract has %q", d.name, name, got, want)
		}
		row := rowOf(crds, name)
		if row == nil {
			t.Errorf("%s, \"CRDs\": the controller %s (contract.Controllers) is missing", d.name, name)
			continue
		}
		if got, want := crdSpans(row[1]), crdStrings(c.Required); !slices.Equal(got, want) {
			t.Errorf("%s, \"CRDs\": %s requires %q, but internal/contract has %q", d.name, name, got, want)
		}
		if got, want := crdSpans(row[2]), crdStrings(c.Optional); !slices.Equal(got, want) {
			t.Errorf("%s, \"CRDs\": %s's optional CRDs are %q, but internal/contract has %q", d.name, name, got, want)
		}
	}
	if len(ctl.rows) != len(contract.Controllers) || len(crds.rows) != len(contract.Controllers) {
		t.Errorf("%s: the Controllers and CRDs tables have %d and %d rows; contract.Controllers has %d controllers", d.name, len(ctl.rows), len(crds.rows), len(contract.Controllers))
	}
}

// The identifier table at the top of contract.md lists every exported
// identifier of internal/contract, and nothing else.
func TestContractIdentifiersMatchTheCode(t *testing.T) {
	p := parsePackage(t, "internal/contract")
	exported := map[string]bool{} // top-level names, and Type.Method
	for _, f := range p.files {
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if !decl.Name.IsExported() {
					continue
				}
				if decl.Recv == nil {
					exported[decl.Name.Name] = true
					continue
				}
				recv := decl.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				exported[recv.(*ast.Ident).Name+"."+decl.Name.Name] = false // may be listed, need not be
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if spec.Name.IsExported() {
							exported[spec.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							if n.IsExported() {
								exported[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	d := readDoc(t, "contract.md")
	tb := findTable(t, d, d.text, "the identifier table", "what", "identifiers in `internal/contract`")
	var listed []string
	for _, row := range tb.rows {
		for _, s := range spans(row[1]) {
			listed = append(listed, strings.TrimSuffix(s, "()"))
		}
	}
	for _, s := range listed {
		found := false
		for name := range exported {
			if ok, _ := path.Match(s, name); ok {
				found = true
			}
		}
		if !found {
			t.Errorf("%s, the identifier table: lists %s, which internal/contract does not export", d.name, s)
		}
	}
	for name, mustList := range exported {
		if !mustList {
			continue
		}
		covered := slices.ContainsFunc(listed, func(s string) bool { ok, _ := path.Match(s, name); return ok })
		if !covered {
			t.Errorf("%s, the identifier table: internal/contract exports %s, which is not listed", d.name, name)
		}
	}
}
