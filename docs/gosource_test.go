package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/contract"
)

// Some facts live in packages this one may not import (internal packages
// of operator/ and controllers/) or are not exported (a worker count, the
// flags a command registers); those are read from the Go source with
// go/ast. What a package exports is imported instead.

// goPackage is the non-test Go files of one directory.
type goPackage struct {
	dir    string // relative to the repository root, for messages
	files  []*ast.File
	consts map[string]ast.Expr // package-level constants
}

func parsePackage(t *testing.T, dir string) *goPackage {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("..", dir))
	if err != nil {
		t.Fatal(err)
	}
	p := &goPackage{dir: dir, consts: map[string]ast.Expr{}}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("..", dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		p.files = append(p.files, f)
		eachConst(f, func(name string, _ *ast.ValueSpec, value ast.Expr) { p.consts[name] = value })
	}
	if len(p.files) == 0 {
		t.Fatalf("%s holds no Go file", dir)
	}
	return p
}

// stringConsts returns the package's string constants whose name, or
// whose declared type, satisfies keep.
func (p *goPackage) stringConsts(t *testing.T, keep func(name, typ string) bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range p.files {
		eachConst(f, func(name string, vs *ast.ValueSpec, value ast.Expr) {
			typ := ""
			if id, ok := vs.Type.(*ast.Ident); ok {
				typ = id.Name
			}
			if !keep(name, typ) {
				return
			}
			v, ok := p.eval(value)
			if !ok || v.kind != kindString {
				t.Fatalf("%s: cannot read the value of constant %s", p.dir, name)
			}
			out[name] = v.text
		})
	}
	return out
}

// eachConst calls fn with every package-level constant of f that has a
// value of its own: its name, its spec and its value expression.
func eachConst(f *ast.File, fn func(name string, spec *ast.ValueSpec, value ast.Expr)) {
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					fn(n.Name, vs, vs.Values[i])
				}
			}
		}
	}
}

// value is what eval makes of a Go expression.
type valueKind int

const (
	kindString valueKind = iota
	kindInt
	kindBool
	kindDuration
	kindVersion // contract.Version(): the binary's stamped version
)

type value struct {
	kind valueKind
	text string
	n    int64
}

// contractValues are the constants of internal/contract that the flag
// definitions use, imported rather than read: the flag names (strings), then
// the numbers.
var contractValues = func() map[string]value {
	out := map[string]value{
		// An untyped constant: a fractional default would not compile here.
		"DefaultKubeAPIQPS":     {kind: kindInt, n: contract.DefaultKubeAPIQPS},
		"DefaultKubeAPIBurst":   {kind: kindInt, n: contract.DefaultKubeAPIBurst},
		"DefaultKubeAPITimeout": {kind: kindDuration, n: int64(contract.DefaultKubeAPITimeout)},
		"MetricsPort":           {kind: kindInt, n: contract.MetricsPort},
		"HealthPort":            {kind: kindInt, n: contract.HealthPort},
	}
	for name, flag := range map[string]string{
		"FlagMetricsAddress":          contract.FlagMetricsAddress,
		"FlagHealthAddress":           contract.FlagHealthAddress,
		"FlagLeaderElect":             contract.FlagLeaderElect,
		"FlagLeaderElectionNS":        contract.FlagLeaderElectionNS,
		"FlagLogLevel":                contract.FlagLogLevel,
		"FlagNamespace":               contract.FlagNamespace,
		"FlagPprofAddress":            contract.FlagPprofAddress,
		"FlagKubeAPIQPS":              contract.FlagKubeAPIQPS,
		"FlagKubeAPIBurst":            contract.FlagKubeAPIBurst,
		"FlagKubeAPITimeout":          contract.FlagKubeAPITimeout,
		"FlagGracefulShutdownTimeout": contract.FlagGracefulShutdownTimeout,
		"FlagGlobalRateLimit":         contract.FlagGlobalRateLimit,
		"FlagGlobalRateLimitFailOpen": contract.FlagGlobalRateLimitFailOpen,
		"FlagGlobalRateLimitTimeout":  contract.FlagGlobalRateLimitTimeout,
		"FlagGRPCAddress":             contract.FlagGRPCAddress,
		"FlagRedisConfigDir":          contract.FlagRedisConfigDir,
		"FlagRedisTLS":                contract.FlagRedisTLS,
		"FlagMaxKeysPerRule":          contract.FlagMaxKeysPerRule,
		"RedisConfigDir":              contract.RedisConfigDir,
	} {
		out[name] = value{kind: kindString, text: flag}
	}
	return out
}()

var durationUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

// eval evaluates the constant expressions flag and metric definitions use;
// ok is false for anything else (a value computed at run time).
func (p *goPackage) eval(e ast.Expr) (value, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		switch e.Kind {
		case token.STRING:
			s, err := strconv.Unquote(e.Value)
			return value{kind: kindString, text: s}, err == nil
		case token.INT:
			n, err := strconv.ParseInt(e.Value, 0, 64)
			return value{kind: kindInt, n: n, text: e.Value}, err == nil
		}
	case *ast.ParenExpr:
		return p.eval(e.X)
	case *ast.Ident:
		switch e.Name {
		case "true", "false":
			return value{kind: kindBool, text: e.Name}, true
		}
		if c, ok := p.consts[e.Name]; ok {
			return p.eval(c)
		}
	case *ast.SelectorExpr:
		pkg, ok := e.X.(*ast.Ident)
		if !ok {
			return value{}, false
		}
		switch pkg.Name {
		case "contract":
			v, ok := contractValues[e.Sel.Name]
			return v, ok
		case "time":
			d, ok := durationUnits[e.Sel.Name]
			return value{kind: kindDuration, n: int64(d)}, ok
		}
	case *ast.BinaryExpr:
		x, okX := p.eval(e.X)
		y, okY := p.eval(e.Y)
		if !okX || !okY || e.Op != token.MUL || (x.kind != kindInt && x.kind != kindDuration) || (y.kind != kindInt && y.kind != kindDuration) {
			return value{}, false
		}
		kind := kindInt
		if x.kind == kindDuration || y.kind == kindDuration {
			kind = kindDuration
		}
		return value{kind: kind, n: x.n * y.n}, true
	case *ast.CallExpr:
		return p.evalCall(e)
	}
	return value{}, false
}

func (p *goPackage) evalCall(e *ast.CallExpr) (value, bool) {
	switch calleeName(e) {
	case "contract.Version":
		return value{kind: kindVersion}, true
	case "fmt.Sprintf":
		if len(e.Args) == 0 {
			return value{}, false
		}
		format, ok := p.eval(e.Args[0])
		if !ok || format.kind != kindString {
			return value{}, false
		}
		var args []any
		for _, a := range e.Args[1:] {
			v, ok := p.eval(a)
			switch {
			case !ok:
				return value{}, false
			case v.kind == kindInt:
				args = append(args, v.n)
			default:
				args = append(args, v.text)
			}
		}
		return value{kind: kindString, text: fmt.Sprintf(format.text, args...)}, true
	}
	return value{}, false
}

// calleeName is "pkg.Func" or "x.Method" for a call, or "Func".
func calleeName(e *ast.CallExpr) string {
	switch fn := e.Fun.(type) {
	case *ast.Ident:
		return fn.Name
	case *ast.SelectorExpr:
		if x, ok := fn.X.(*ast.Ident); ok {
			return x.Name + "." + fn.Sel.Name
		}
		return "." + fn.Sel.Name
	}
	return ""
}

// codeFlag is one command-line flag a command registers.
type codeFlag struct {
	command string // "" for the root command, else the subcommand
	name    string
	def     value
	known   bool // def is a constant; false: computed at run time
}

func (f codeFlag) key() string { return strings.TrimSpace(f.command + " " + f.name) }

// pflag's definitions: name and default argument positions.
var flagDefiners = map[string][2]int{
	"StringVar": {1, 2}, "BoolVar": {1, 2}, "DurationVar": {1, 2}, "IntVar": {1, 2}, "Float64Var": {1, 2},
	"StringSliceVar": {1, 2}, "Int32SliceVar": {1, 2},
	"String": {0, 1}, "Bool": {0, 1}, "Duration": {0, 1}, "Int": {0, 1}, "Float64": {0, 1},
}

// flags returns the flags the package's commands register with pflag, and
// the standard-library flags they adopt (flag.CommandLine.Lookup). A flag
// registered in a function newXCommand belongs to the subcommand x
// (newRootCommand and every other function: the root command).
func (p *goPackage) flags(t *testing.T) []codeFlag {
	t.Helper()
	var out []codeFlag
	for _, f := range p.files {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			command := ""
			if name := fd.Name.Name; strings.HasPrefix(name, "new") && strings.HasSuffix(name, "Command") && name != "newRootCommand" {
				command = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(name, "new"), "Command"))
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if sel.Sel.Name == "Lookup" && len(call.Args) == 1 && isSelector(sel.X, "flag", "CommandLine") {
					if name, ok := p.eval(call.Args[0]); ok {
						out = append(out, codeFlag{command: command, name: name.text})
					}
					return true
				}
				pos, ok := flagDefiners[sel.Sel.Name]
				if !ok || len(call.Args) != pos[1]+2 {
					return true
				}
				name, ok := p.eval(call.Args[pos[0]])
				if !ok || name.kind != kindString {
					t.Fatalf("%s: cannot read the name of a flag defined with %s", p.dir, sel.Sel.Name)
				}
				def, known := p.eval(call.Args[pos[1]])
				if known && strings.HasPrefix(sel.Sel.Name, "Duration") && def.kind == kindInt {
					def.kind = kindDuration
				}
				out = append(out, codeFlag{command: command, name: name.text, def: def, known: known})
				return true
			})
		}
	}
	slices.SortFunc(out, func(a, b codeFlag) int { return strings.Compare(a.key(), b.key()) })
	return out
}

func isSelector(e ast.Expr, x, sel string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == x && s.Sel.Name == sel
}

// String renders a value as the docs write it.
func (v value) String() string {
	switch v.kind {
	case kindInt:
		return strconv.FormatInt(v.n, 10)
	case kindDuration:
		return time.Duration(v.n).String()
	case kindVersion:
		return "the binary's version"
	}
	return v.text
}
