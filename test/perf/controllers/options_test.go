package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// The flags are checked as parsed, as main hands them to the parser: not
// the defaults.
func TestFlagsAreCheckedAsParsed(t *testing.T) {
	for args, ok := range map[string]bool{
		"":                    true,
		"--apirules 20":       true,
		"--ratelimits 0":      false,
		"--apirules 0":        false,
		"--flood -1":          false,
		"--gateways 2 --down": true,
	} {
		o := defaultOptions()
		fs := flag.NewFlagSet("controllers", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.addFlags(fs)
		err := framework.ParseBenchFlags(fs, strings.Fields(args), o.valid)
		if (err == nil) != ok {
			t.Errorf("%q: error %v, want accepted=%v", args, err, ok)
		}
	}
}
