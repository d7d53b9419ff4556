package framework

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-dev/portico/test/testenv"
)

// Logf prints a benchmark's progress line on stderr (results go to
// stdout).
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// BenchOptions are what every benchmark of test/perf is told: where it
// runs, how long it may wait, and where its results go.
type BenchOptions struct {
	// Cluster is the kwok cluster hack/cluster.sh brings up, unless
	// Kubeconfig names another cluster to use.
	Cluster    string
	Kubeconfig string
	// Down deletes the cluster at the end (only one the benchmark brought
	// up).
	Down bool
	// Timeout bounds every single wait.
	Timeout time.Duration
	// Output receives the results as PerfData ("" for none). Relative
	// paths here and in Baseline are relative to the repository.
	Output string
	// Baseline is the PerfData the results are compared with ("" for no
	// comparison); UpdateBaseline writes the results there instead.
	Baseline       string
	UpdateBaseline bool
	// Tolerance is the share by which a gated value may exceed its
	// baseline.
	Tolerance float64
	// Exempt are the figures of gated units the bench does not gate
	// (set by the bench, not a flag).
	Exempt []Exemption
}

// AddFlags registers the options as flags, with their current values as
// defaults.
func (o *BenchOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Cluster, "cluster", o.Cluster, "name of the kwok cluster hack/cluster.sh brings up")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "use this cluster instead of bringing one up with hack/cluster.sh (--down is ignored)")
	fs.BoolVar(&o.Down, "down", o.Down, "delete the cluster at the end (default: leave it up for the next run)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "limit for every single wait")
	o.AddResultFlags(fs)
}

// AddResultFlags registers only the options about results: output,
// baseline and tolerance.
func (o *BenchOptions) AddResultFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Output, "output", o.Output, "write the results there as PerfData JSON (empty: do not)")
	fs.StringVar(&o.Baseline, "baseline", o.Baseline, "compare the results with this PerfData file (empty: do not)")
	fs.BoolVar(&o.UpdateBaseline, "update-baseline", o.UpdateBaseline, "write the results to --baseline instead of comparing")
	fs.Float64Var(&o.Tolerance, "tolerance", o.Tolerance, "share by which a gated value (a ratio of the run, a count, memory; never a time) may exceed its baseline before it counts as a regression")
}

// RepoPath resolves a path relative to the repository's top directory.
func RepoPath(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(testenv.RepoRoot(), path)
}

// ErrRegressed is returned by Publish when a gated value exceeds its
// baseline beyond the tolerance.
var ErrRegressed = errors.New("results regressed against the baseline")

// Publish writes the results, with the machine they were measured on, to
// o.Output and compares them with o.Baseline, printing the comparison to w
// (or that there is no baseline file yet); with o.UpdateBaseline it writes
// them to o.Baseline instead. Only gated values can fail it.
func (o BenchOptions) Publish(w io.Writer, d PerfData) error {
	d.Version = PerfDataVersion
	d.Machine = withHost(d.Machine, ThisMachine())
	if o.Output != "" {
		if err := WritePerfData(RepoPath(o.Output), d); err != nil {
			return fmt.Errorf("results: %w", err)
		}
		Logf("results written to %s", o.Output)
	}
	switch {
	case o.Baseline == "":
		return nil
	case o.UpdateBaseline:
		if err := WritePerfData(RepoPath(o.Baseline), d); err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		Logf("baseline %s updated (machine: %s)", o.Baseline, d.Machine)
		return nil
	}
	baseline, err := ReadPerfData(RepoPath(o.Baseline))
	if errors.Is(err, fs.ErrNotExist) {
		// A new scale or benchmark: its first real run writes one.
		fmt.Fprintf(w, "\nno baseline %s: the results were not compared (write one with --update-baseline)\n", o.Baseline)
		return nil
	}
	if err != nil {
		return fmt.Errorf("baseline: %w (write one with --update-baseline)", err)
	}
	return o.compare(w, baseline, d)
}

// compare prints the run against its baseline and fails on the gated
// values that regressed.
func (o BenchOptions) compare(w io.Writer, baseline, d PerfData) error {
	p := Policy{Tolerance: DefaultTolerance, Exempt: o.Exempt}
	p.Tolerance.Relative = o.Tolerance
	cs := Compare(baseline, d, p)
	fmt.Fprintf(w, "\ncompared with %s\nbaseline's machine: %s\nthis machine:       %s\n%s\n\n",
		o.Baseline, baseline.Machine, d.Machine, SpeedNote(baseline.Machine, d.Machine))
	if err := WriteReport(w, cs, p); err != nil {
		return err
	}
	regressed := Regressions(cs)
	fmt.Fprintf(w, "\n%d gated values compared, %d regressed; %d informational values not judged\n",
		len(OfClass(cs, ClassGated)), len(regressed), len(OfClass(cs, ClassInfo)))
	if len(regressed) > 0 {
		names := make([]string, 0, len(regressed))
		for _, c := range regressed {
			names = append(names, c.Item+" "+c.Key)
		}
		return fmt.Errorf("%w: %d gated values (%s)", ErrRegressed, len(regressed), strings.Join(names, "; "))
	}
	return nil
}

// NewBenchFlags returns the flag set of a benchmark command, whose usage
// text starts with about. It is not flag.CommandLine, where
// controller-runtime registers --kubeconfig.
func NewBenchFlags(name, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./test/perf/%s [flags]\n\n%s\n\n", name, about)
		fs.PrintDefaults()
	}
	return fs
}

// ParseBenchFlags parses args; arguments that are not flags, or flags that
// valid rejects, print the usage and fail.
func ParseBenchFlags(fs *flag.FlagSet, args []string, valid func() bool) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || !valid() {
		fs.Usage()
		return errors.New("invalid arguments")
	}
	return nil
}

// BenchMain is the main function of a benchmark command: it parses the
// arguments with parse and runs the benchmark until it ends or is
// interrupted. It exits 0 when the benchmark ran (or on --help), 1 when it
// broke and 2 on bad arguments.
func BenchMain(parse func(args []string) error, run func(ctx context.Context) error) {
	if err := parse(os.Args[1:]); errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	} else if err != nil {
		os.Exit(2)
	}
	// The benchmark's informers log through controller-runtime; what
	// matters is returned as an error instead.
	ctrl.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: error: %v\n", err)
		os.Exit(1)
	}
}
