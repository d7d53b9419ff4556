// Package docs holds Portico's documentation; its tests check the facts
// the documentation states about the tree.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
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
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Repository layout\n")
	if !ok {
		t.Fatal("architecture.md has no section \"Repository layout\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	var paths []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		paths = append(paths, strings.TrimSuffix(m[1], "/"))
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
