// Package docs holds Portico's documentation; its tests check the facts
// the documentation states about the tree.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// foundingLayout is the top level the founding design names
// (../shared/design.md).
var foundingLayout = []string{
	"operator", "controllers", "charts", "api", "config", "e2e",
	"Makefile", "Dockerfile.operator", "Dockerfile.controllers", "go.mod",
}

// layoutPaths returns the paths of the first column of the repository
// layout table of architecture.md, without a trailing "/".
func layoutPaths(t *testing.T) []string {
	t.Helper()
	d := readDoc(t, "architecture.md")
	tb := findTable(t, d, d.section(t, "Repository layout"), `"Repository layout"`, "path", "what")
	var paths []string
	for _, row := range tb.rows {
		if sp := spans(row[0]); len(sp) > 0 {
			paths = append(paths, strings.TrimSuffix(sp[0], "/"))
		}
	}
	if len(paths) == 0 {
		t.Fatal("the layout table lists no path")
	}
	return paths
}

// The layout table of architecture.md matches the tree: every path it
// lists exists, and every directory at the top level and directly under
// internal/ and test/ is listed (or lies under a listed path).
func TestLayoutTableMatchesTheTree(t *testing.T) {
	root := ".."
	paths := layoutPaths(t)
	listed := func(dir string) bool {
		for _, p := range paths {
			if p == dir || strings.HasPrefix(p, dir+"/") || strings.HasPrefix(dir, p+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range paths {
		if strings.Contains(p, "<") {
			p = p[:strings.Index(p, "<")] // controllers/<name>: its parent
		}
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("architecture.md lists %s, which does not exist", p)
		}
	}
	for _, parent := range []string{".", "internal", "test"} {
		entries, err := os.ReadDir(filepath.Join(root, parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || strings.HasPrefix(name, ".") || (parent == "." && name == "bin") {
				continue // hidden, and the build output
			}
			if dir := filepath.ToSlash(filepath.Join(parent, name)); !listed(dir) {
				t.Errorf("%s is missing from the layout table of architecture.md", dir)
			}
		}
	}
}

// The top level has every entry of the founding layout.
func TestFoundingLayout(t *testing.T) {
	for _, name := range foundingLayout {
		if _, err := os.Stat(filepath.Join("..", name)); err != nil {
			t.Errorf("the founding layout's %s is missing at the top level: %v", name, err)
		}
	}
}

// goModules returns the directories of the tree that hold a go.mod,
// relative to the repository root ("." for the root), with their module
// paths.
func goModules(t *testing.T) map[string]string {
	t.Helper()
	modulePath := regexp.MustCompile(`(?m)^module\s+(\S+)`)
	out := map[string]string{}
	err := filepath.WalkDir("..", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() && p != ".." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "bin" || name == "testdata" || name == "dist") {
			return filepath.SkipDir
		}
		if e.IsDir() || name != "go.mod" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		m := modulePath.FindSubmatch(b)
		if m == nil {
			t.Errorf("%s has no module line", p)
			return nil
		}
		rel, _ := filepath.Rel("..", filepath.Dir(p))
		out[filepath.ToSlash(rel)] = string(m[1])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every Go module of the tree has a row of its own in the layout table,
// and the "Go modules" table of architecture.md lists exactly the tree's
// modules with their module paths.
func TestGoModulesAreDocumented(t *testing.T) {
	modules := goModules(t)
	if modules["."] == "" || len(modules) < 2 {
		t.Fatalf("found the modules %v: the walk no longer finds go.mod files", modules)
	}
	paths := layoutPaths(t)
	for dir := range modules {
		if dir != "." && !slices.Contains(paths, dir) {
			t.Errorf("docs/architecture.md, \"Repository layout\": the Go module %s has no row of its own", dir)
		}
	}
	d := readDoc(t, "architecture.md")
	tb := findTable(t, d, d.section(t, "Go modules"), `"Go modules"`, "module", "directory")
	listed := map[string]bool{}
	for _, row := range tb.rows {
		mod, dir := spans(row[0]), spans(row[1])
		if len(mod) == 0 || len(dir) == 0 {
			t.Errorf("%s, \"Go modules\": the row %q names no module or directory", d.name, row)
			continue
		}
		listed[dir[0]] = true
		switch got, ok := modules[dir[0]]; {
		case !ok:
			t.Errorf("%s, \"Go modules\": lists the module directory %s, which holds no go.mod", d.name, dir[0])
		case got != mod[0]:
			t.Errorf("%s, \"Go modules\": says %s is module %s, but its go.mod says %s", d.name, dir[0], mod[0], got)
		}
	}
	for dir, mod := range modules {
		if !listed[dir] {
			t.Errorf("%s, \"Go modules\": the module %s (%s/go.mod) is not listed", d.name, mod, dir)
		}
	}
}

// Every path of README.md's layout table exists.
func TestReadmeLayoutPathsExist(t *testing.T) {
	d := readDoc(t, "../README.md")
	tb := findTable(t, d, d.section(t, "Design"), `"Design"`, "path", "what")
	for _, row := range tb.rows {
		for _, p := range spans(row[0]) {
			if _, err := os.Stat(filepath.Join("..", strings.TrimSuffix(p, "/"))); err != nil {
				t.Errorf("%s, \"Design\": lists %s, which does not exist", d.name, p)
			}
		}
	}
}
