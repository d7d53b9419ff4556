package main

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// options are the bench's flags.
type options struct {
	framework.BenchOptions
	sizes
	workers  int
	flood    int
	edits    int
	sample   time.Duration
	binDir   string
	logLevel string
	keep     bool
	profiles framework.CPUProfiles
	// memoryLimit is the container memory limit the controllers are told
	// of, as the operator tells them (0: none).
	memoryLimit resource.Quantity
}

func defaultOptions() options {
	return options{
		BenchOptions: framework.BenchOptions{
			Cluster: "portico-bench-ctrl", Timeout: 15 * time.Minute, Tolerance: framework.DefaultTolerance.Relative,
			Output: "bin/perf/controllers.json", Baseline: "test/perf/baseline/controllers.json",
			Exempt: exemptions,
		},
		sizes:   sizes{apiRules: 1000, rateLimits: 1000, gateways: 50, namespaces: 50},
		workers: 16, flood: 500, edits: 100, sample: 2 * time.Second, binDir: "bin", logLevel: "info",
	}
}

// addFlags registers the command's flags on fs.
func (o *options) addFlags(fs *flag.FlagSet) {
	o.AddFlags(fs)
	for _, count := range []struct {
		value       *int
		name, usage string
	}{
		{&o.apiRules, "apirules", "APIRules (and Services) to create in (1)"},
		{&o.rateLimits, "ratelimits", "RateLimits to create in (2)"},
		{&o.gateways, "gateways", "Istio Gateways (each with its own pod) the APIRules and RateLimits spread over"},
		{&o.namespaces, "namespaces", "namespaces the Services, APIRules and APIRule-kind RateLimits spread over"},
		{&o.workers, "workers", "concurrent create calls"},
		{&o.edits, "edits", "edits of one APIRule at a time at steady state after (1), each timed until applied (0: none)"},
		{&o.flood, "flood", "APIRules and RateLimits team-b floods the controllers with in (3), the noisy-neighbour phase (0: no phase)"},
	} {
		fs.IntVar(count.value, count.name, *count.value, count.usage)
	}
	fs.DurationVar(&o.sample, "sample", o.sample, "interval of the controllers' heap samples (from /metrics)")
	fs.StringVar(&o.binDir, "bin", o.binDir, "directory of apirule-controller and ratelimit-controller (build them with `make build`)")
	fs.StringVar(&o.logLevel, "log-level", o.logLevel, "--log-level of the controllers (their logs go to temporary files)")
	fs.StringVar(&o.profiles.Dir, "cpuprofile-dir", "", "write CPU profiles of the controller and kube-apiserver, from the start of each phase, to <dir>/<controller of the phase>[-<mode of its APIRules>]/<process>.pprof (apirule-istio, apirule-httproute, ratelimit)")
	fs.DurationVar(&o.profiles.Duration, "cpuprofile-duration", 30*time.Second, "length of each CPU profile of --cpuprofile-dir")
	fs.Func("memory-limit", "a container memory limit (e.g. 320Mi) the controllers get as the operator passes theirs ($"+contract.EnvMemoryLimit+"), so that they keep their heap under 90% of it (GOMEMLIMIT); none by default", func(v string) error {
		q, err := resource.ParseQuantity(v)
		o.memoryLimit = q
		return err
	})
	fs.BoolVar(&o.keep, "keep", o.keep, "leave the bench's objects in the cluster at the end (the next run removes them)")
}

// memoryEnv is the controllers' environment for --memory-limit.
func (o options) memoryEnv() []string {
	if o.memoryLimit.IsZero() {
		return nil
	}
	return []string{fmt.Sprintf("%s=%d", contract.EnvMemoryLimit, o.memoryLimit.Value())}
}

// valid reports whether the parsed flags make a bench. A pointer receiver:
// main hands o.valid to the flag parser before parsing, and a method value
// of a copy would check the defaults (it did: --ratelimits 0 was accepted
// and ran a RateLimit phase that never ended).
func (o *options) valid() bool {
	return o.apiRules > 0 && o.rateLimits > 0 && o.gateways > 0 && o.namespaces > 0 &&
		o.workers > 0 && o.flood >= 0 && o.edits >= 0 && o.sample > 0 && o.Timeout > 0
}
