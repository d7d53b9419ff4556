package framework

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes rows as aligned columns; the first row is the header
// and is underlined.
func WriteTable(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
		if i == 0 {
			rule := make([]string, len(row))
			for j, cell := range row {
				rule[j] = strings.Repeat("-", len(cell))
			}
			fmt.Fprintln(tw, strings.Join(rule, "\t"))
		}
	}
	return tw.Flush()
}

// FormatSeconds formats a duration as seconds: "1.23s".
func FormatSeconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// FormatMilliseconds formats a duration as milliseconds: "1.2ms".
func FormatMilliseconds(d time.Duration) string { return fmt.Sprintf("%.1fms", Milliseconds(d)) }

// FormatMiB formats bytes as MiB: "1.2 MiB".
func FormatMiB(bytes float64) string { return fmt.Sprintf("%.1f MiB", MiB(bytes)) }
