package modules

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// compiled are the modules make test compiles together (the Makefile's
// GO_MODULES), relative to the repository root. hack/tools and its
// siblings build other projects' binaries at those projects' pins and are
// not held to this.
var compiled = []string{".", "hack/release", "e2e", "test/monitoring", "test/istio"}

// requirements reads the require directives of a go.mod: module path to
// version. Replaced modules are skipped (their version is "=>" or a local
// path's placeholder).
func requirements(t *testing.T, goMod string) map[string]string {
	t.Helper()
	f, err := os.Open(goMod)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs := map[string]string{}
	replaced := map[string]bool{}
	block := "" // "require" or "replace" inside a ( ) block
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case (fields[0] == "require" || fields[0] == "replace") && len(fields) == 2 && fields[1] == "(":
			block = fields[0]
			continue
		case block != "" && fields[0] == ")":
			block = ""
			continue
		case fields[0] == "replace" && len(fields) >= 2:
			replaced[fields[1]] = true
			continue
		case block == "replace":
			replaced[fields[0]] = true
			continue
		}
		inRequire := block == "require"
		if fields[0] == "require" {
			fields = fields[1:]
		} else if !inRequire {
			continue
		}
		if len(fields) >= 2 {
			reqs[fields[0]] = fields[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for p := range replaced {
		delete(reqs, p)
	}
	return reqs
}

// differing lists, for each module path two go.mod files require at
// different versions, which file requires which version.
func differing(byModule map[string]map[string]string) []string {
	versions := map[string]map[string][]string{}
	for dir, reqs := range byModule {
		for path, v := range reqs {
			if versions[path] == nil {
				versions[path] = map[string][]string{}
			}
			versions[path][v] = append(versions[path][v], dir)
		}
	}
	var out []string
	for path, vs := range versions {
		if len(vs) < 2 {
			continue
		}
		var parts []string
		for v, dirs := range vs {
			sort.Strings(dirs)
			parts = append(parts, fmt.Sprintf("%s in %s", v, strings.Join(dirs, ", ")))
		}
		sort.Strings(parts)
		out = append(out, fmt.Sprintf("%s: %s", path, strings.Join(parts, "; ")))
	}
	sort.Strings(out)
	return out
}

func TestCompiledModulesRequireOneVersionOfEachModule(t *testing.T) {
	root := filepath.Join("..", "..")
	byModule := map[string]map[string]string{}
	for _, dir := range compiled {
		byModule[dir] = requirements(t, filepath.Join(root, dir, "go.mod"))
	}
	if len(byModule["."]) == 0 || len(byModule["test/istio"]) == 0 {
		t.Fatal("no requirements read: the go.mod parser is broken")
	}
	if d := differing(byModule); len(d) > 0 {
		t.Errorf("modules compiled together require different versions of %d modules; run `go get <module>@<highest>` "+
			"in each module that requires a lower one, then `go mod tidy`:\n%s", len(d), strings.Join(d, "\n"))
	}
}

func TestDifferingNamesEveryVersionAndModule(t *testing.T) {
	got := differing(map[string]map[string]string{
		".":               {"golang.org/x/net": "v0.58.0", "k8s.io/api": "v0.37.2"},
		"test/monitoring": {"golang.org/x/net": "v0.61.0", "k8s.io/api": "v0.37.2"},
		"e2e":             {"golang.org/x/net": "v0.58.0"},
	})
	want := []string{"golang.org/x/net: v0.58.0 in ., e2e; v0.61.0 in test/monitoring"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("differing = %q, want %q", got, want)
	}
}

func TestRequirementsReadsBlocksLinesAndSkipsReplaced(t *testing.T) {
	goMod := filepath.Join(t.TempDir(), "go.mod")
	text := `module example.com/m

go 1.26

require example.com/single v1.0.0

require (
	example.com/a v1.2.3
	example.com/b v0.0.0-20260101000000-abcdef123456 // indirect
	example.com/local v0.0.0
	example.com/other v0.0.0
)

replace example.com/local => ../local

replace (
	example.com/other v0.0.0 => ../other
)
`
	if err := os.WriteFile(goMod, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := requirements(t, goMod)
	want := map[string]string{
		"example.com/single": "v1.0.0",
		"example.com/a":      "v1.2.3",
		"example.com/b":      "v0.0.0-20260101000000-abcdef123456",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requirements = %v, want %v", got, want)
	}
}
