package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// doc is one documentation file, read relative to this package's
// directory (go test runs there, also with -trimpath).
type doc struct {
	name string // as the failure messages name it, e.g. docs/contract.md
	text string
}

func readDoc(t *testing.T, path string) doc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := "docs/" + path
	if strings.HasPrefix(path, "../") {
		name = strings.TrimPrefix(path, "../")
	}
	return doc{name: name, text: string(b)}
}

// section returns the text under the heading whose title is title (any
// level), up to the next heading of the same or a higher level; fenced code
// blocks are left out.
func (d doc) section(t *testing.T, title string) string {
	t.Helper()
	lines := strings.Split(d.text, "\n")
	level, start := 0, -1
	var out []string
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if l := headingLevel(line); l > 0 {
			if start >= 0 && l <= level {
				break
			}
			if start < 0 && strings.TrimSpace(line[l:]) == title {
				level, start = l, i
				continue
			}
		}
		if start >= 0 {
			out = append(out, line)
		}
	}
	if start < 0 {
		t.Fatalf("%s has no section %q", d.name, title)
	}
	return strings.Join(out, "\n")
}

func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n == len(line) || line[n] != ' ' {
		return 0
	}
	return n
}

// subsections splits a section's text at its "### " headings.
func subsections(text string) map[string]string {
	out := map[string]string{}
	var title string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "### ") {
			title = strings.TrimSpace(strings.TrimPrefix(line, "### "))
			continue
		}
		if title != "" {
			out[title] += line + "\n"
		}
	}
	return out
}

// table is a Markdown table: its header cells and rows of cells.
type table struct {
	header []string
	rows   [][]string
}

// col returns the index of the header cell named name, or -1.
func (tb table) col(name string) int {
	for i, h := range tb.header {
		if h == name {
			return i
		}
	}
	return -1
}

// tables returns the tables of a text, outside fenced code.
func tables(text string) []table {
	var out []table
	var cur *table
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "|") {
			cur = nil
			continue
		}
		cells := splitRow(line)
		switch {
		case cur == nil:
			out = append(out, table{header: cells})
			cur = &out[len(out)-1]
		case isDelimiterRow(cells):
		default:
			cur.rows = append(cur.rows, cells)
		}
	}
	return out
}

// findTable returns the first table of text whose header starts with the
// given cells.
func findTable(t *testing.T, d doc, text, where string, header ...string) table {
	t.Helper()
	for _, tb := range tables(text) {
		if len(tb.header) >= len(header) && strings.Join(tb.header[:len(header)], "|") == strings.Join(header, "|") {
			return tb
		}
	}
	t.Fatalf("%s, %s: no table with the columns %q", d.name, where, header)
	return table{}
}

// splitRow splits a table row into trimmed cells; a "|" inside a code span
// does not split.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cell strings.Builder
	inCode := false
	for _, r := range line {
		switch {
		case r == '`':
			inCode = !inCode
		case r == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
			continue
		}
		cell.WriteRune(r)
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

func isDelimiterRow(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// spans returns the code spans of a text, without their backticks.
func spans(text string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// withoutParentheses drops every parenthesised part of a text (one level
// of nesting is enough for the tables).
func withoutParentheses(text string) string {
	var b strings.Builder
	depth := 0
	for _, r := range text {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a document's headings as GitHub makes
// them (lower case, punctuation dropped, spaces as hyphens, repeats with
// -1, -2, …), and those of explicit <a id|name="…"> tags; fenced code
// blocks are left out.
func anchors(d doc) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	explicit := regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	fenced := false
	for _, line := range strings.Split(d.text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range explicit.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		l := headingLevel(line)
		if l == 0 {
			continue
		}
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(line[l:])), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// Every "#section" link of the docs resolves: to a heading (or explicit
// anchor) of the same page, or of the docs/*.md page it names.
func TestIntraDocAnchorsResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	docs := map[string]doc{}
	for _, p := range pages {
		docs[p] = readDoc(t, p)
	}
	link := regexp.MustCompile(`\]\(([A-Za-z0-9_.-]*\.md)?#([^)\s]+)\)`)
	checked := 0
	for _, p := range pages {
		d := docs[p]
		fenced := false
		for i, line := range strings.Split(d.text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := p
				if m[1] != "" {
					target = m[1]
				}
				to, ok := docs[target]
				if !ok {
					continue // a page outside docs/ (README.md, a file of the tree)
				}
				checked++
				if !anchors(to)[m[2]] {
					t.Errorf("%s:%d links to %s#%s, which has no such section", d.name, i+1, target, m[2])
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no anchor link to check")
	}
}
