package memlimit

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"

	"github.com/portico-dev/portico/internal/contract"
)

func TestSoftLimit(t *testing.T) {
	tests := map[string]struct {
		containerLimit string
		goMemLimitSet  bool
		want           Decision
		wantErr        string
	}{
		"unset or empty: no limit known":  {containerLimit: "", want: Decision{}},
		"blank: no limit known":           {containerLimit: "  ", want: Decision{}},
		"the operator's default 256Mi":    {containerLimit: "268435456", want: Decision{Container: 268435456, Soft: 241591911}},
		"1Gi":                             {containerLimit: "1073741824", want: Decision{Container: 1073741824, Soft: 966367642}},
		"a trailing newline is tolerated": {containerLimit: "1000\n", want: Decision{Container: 1000, Soft: 900}},
		"no container limit: the node's allocatable memory, still a limit": {
			containerLimit: "16508264448", want: Decision{Container: 16508264448, Soft: 14857438004},
		},
		"the largest int64 does not overflow": {
			containerLimit: "9223372036854775807", want: Decision{Container: math.MaxInt64, Soft: math.MaxInt64 - math.MaxInt64/10},
		},
		"zero: no limit":          {containerLimit: "0", want: Decision{}},
		"negative: no limit":      {containerLimit: "-1", want: Decision{}},
		"a quantity is not bytes": {containerLimit: "256Mi", wantErr: `$PORTICO_MEMORY_LIMIT must be the container's memory limit in bytes, not "256Mi"`},
		"garbage":                 {containerLimit: "lots", wantErr: `not "lots"`},
		"beyond int64":            {containerLimit: "99999999999999999999", wantErr: "in bytes"},
		"GOMEMLIMIT set: kept":    {containerLimit: "268435456", goMemLimitSet: true, want: Decision{UserSet: true}},
		"GOMEMLIMIT set, garbage limit: kept, no error": {containerLimit: "lots", goMemLimitSet: true, want: Decision{UserSet: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := SoftLimit(tc.containerLimit, tc.goMemLimitSet)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(got).To(Equal(Decision{}))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// Apply sets the runtime's soft limit only when SoftLimit decides one, and
// says so.
func TestApply(t *testing.T) {
	previous := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(previous) })
	const untouched = int64(1 << 50)
	tests := map[string]struct {
		env       map[string]string
		wantSoft  int64
		wantLimit int64
		wantLog   string
	}{
		"limit set": {
			env:      map[string]string{contract.EnvMemoryLimit: "1000000"},
			wantSoft: 900000, wantLimit: 900000,
			wantLog: `"level"=0 "msg"="Go memory limit set to 90% of the container's memory limit" "bytes"=900000 "containerBytes"=1000000`,
		},
		"no variable": {env: map[string]string{}, wantLimit: untouched},
		"GOMEMLIMIT kept": {
			env:       map[string]string{contract.EnvMemoryLimit: "1000000", EnvGoMemLimit: "1PiB"},
			wantLimit: untouched,
			wantLog:   `"level"=0 "msg"="Keeping the Go memory limit of $GOMEMLIMIT" "bytes"=1125899906842624`,
		},
		"empty GOMEMLIMIT is not set": {
			env:      map[string]string{contract.EnvMemoryLimit: "1000000", EnvGoMemLimit: ""},
			wantSoft: 900000, wantLimit: 900000,
			wantLog: `"msg"="Go memory limit set`,
		},
		"garbage: an error, nothing set": {
			env:       map[string]string{contract.EnvMemoryLimit: "lots"},
			wantLimit: untouched,
			wantLog:   `"msg"="No Go memory limit set" "error"="$PORTICO_MEMORY_LIMIT must be the container's memory limit in bytes, not \"lots\""`,
		},
		"zero: nothing set": {env: map[string]string{contract.EnvMemoryLimit: "0"}, wantLimit: untouched},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			debug.SetMemoryLimit(untouched)
			var lines []string
			log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
			lookupEnv := func(name string) (string, bool) { v, ok := tc.env[name]; return v, ok }

			d := Apply(log, lookupEnv)
			g.Expect(d.Soft).To(Equal(tc.wantSoft))
			g.Expect(debug.SetMemoryLimit(-1)).To(Equal(tc.wantLimit))
			if tc.wantLog == "" {
				g.Expect(lines).To(BeEmpty())
				return
			}
			g.Expect(lines).To(HaveExactElements(ContainSubstring(tc.wantLog)))
		})
	}
}
