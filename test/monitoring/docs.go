package monitoring

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	// metricName is the name at the start of a code span such as
	// `workqueue_depth{name,controller}`.
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// Section returns the body of the Markdown section whose heading (any level)
// is title: the lines up to the next heading of the same or a higher level.
func Section(markdown, title string) (string, error) {
	lines := strings.Split(markdown, "\n")
	for i, line := range lines {
		level := headingLevel(line)
		if level == 0 || strings.TrimSpace(line[level:]) != title {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if l := headingLevel(lines[j]); l > 0 && l <= level {
				end = j
				break
			}
		}
		return strings.Join(lines[i+1:end], "\n"), nil
	}
	return "", fmt.Errorf("no section %q", title)
}

// Headings returns the titles of the headings of the given level in markdown.
func Headings(markdown string, level int) []string {
	var out []string
	for line := range strings.SplitSeq(markdown, "\n") {
		if headingLevel(line) == level {
			out = append(out, strings.TrimSpace(line[level:]))
		}
	}
	return out
}

// headingLevel is the level of a Markdown heading line, 0 for other lines.
func headingLevel(line string) int {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || !strings.HasPrefix(line[n:], " ") {
		return 0
	}
	return n
}

// TableMetrics returns the metric names in the first column of the tables
// of a section: every code span of the cell, up to its first character that
// cannot be part of a metric name.
func TableMetrics(section string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 3 || cells[0] != "" {
			continue
		}
		for _, span := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			if name := metricName.FindString(span[1]); name != "" {
				out[name] = true
			}
		}
	}
	return out
}
