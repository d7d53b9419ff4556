package framework

import (
	"bufio"
	"strings"
	"testing"
)

func TestCPUModel(t *testing.T) {
	for _, tt := range []struct{ cpuinfo, want string }{
		{"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n", "AMD EPYC 7B13"},
		{"processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n", ""},
		{"", ""},
	} {
		if got := cpuModel(bufio.NewScanner(strings.NewReader(tt.cpuinfo))); got != tt.want {
			t.Errorf("cpuModel(%q) = %q, want %q", tt.cpuinfo, got, tt.want)
		}
	}
}

func TestSpeedNote(t *testing.T) {
	floor := func(name string, ms float64) *Machine { return &Machine{CPUs: 2, Floor: name, FloorMilliseconds: ms} }
	for _, tt := range []struct {
		name              string
		baseline, current *Machine
		want              string
	}{
		{"twice as slow", floor("f", 10000), floor("f", 21500), "this machine's floor is 2.15× the baseline's (21.50s here, 10.00s there)"},
		{"twice as fast", floor("f", 10000), floor("f", 5000), "this machine's floor is 0.50× the baseline's"},
		{"an old baseline", nil, floor("f", 5000), "the baseline has no floor time"},
		{"a bench without a floor", &Machine{CPUs: 2}, &Machine{CPUs: 8}, "the baseline has no floor time"},
		{"no floor in the run", floor("f", 1), &Machine{CPUs: 8}, "this run has no floor time"},
		{"another scale's floor", floor("f 1000", 1), floor("f 500", 1), "the floors differ (f 500 here, f 1000 in the baseline)"},
	} {
		if got := SpeedNote(tt.baseline, tt.current); !strings.Contains(got, tt.want) {
			t.Errorf("%s: SpeedNote = %q, want it to contain %q", tt.name, got, tt.want)
		}
	}
}

func TestMachineWithHostAndString(t *testing.T) {
	host := Machine{CPUs: 4, CPUModel: "AMD EPYC 7B13"}
	m := withHost(&Machine{Floor: "f", FloorMilliseconds: 1500}, host)
	want := "4 CPUs, AMD EPYC 7B13; floor 1.50s (f)"
	if got := m.String(); got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := withHost(nil, host).String(); got != "4 CPUs, AMD EPYC 7B13" {
		t.Errorf("without a floor: %q", got)
	}
	if got := (&Machine{CPUs: 2, Note: "old"}).String(); got != "2 CPUs, CPU model unknown; old" {
		t.Errorf("unknown model: %q", got)
	}
	if got := (*Machine)(nil).String(); got != "not recorded" {
		t.Errorf("nil: %q", got)
	}
}
