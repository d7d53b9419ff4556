package framework

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine is where a run took place: its CPUs and, for a bench that
// measures one, its floor (the control plane alone doing the same work),
// whose absolute time says how fast the machine is. A report compares the
// run's with its baseline's.
type Machine struct {
	CPUs     int    `json:"cpus,omitempty"`
	CPUModel string `json:"cpuModel,omitempty"`
	// Floor names the figure ("item value", as the comparison table does)
	// whose time is FloorMilliseconds.
	Floor             string  `json:"floor,omitempty"`
	FloorMilliseconds float64 `json:"floorMilliseconds,omitempty"`
	// Note says what is known of a machine recorded after the fact.
	Note string `json:"note,omitempty"`
}

// ThisMachine is the machine the bench runs on: runtime.NumCPU() and the
// CPU model of /proc/cpuinfo ("" when unknown).
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(bufio.NewScanner(f))
		_ = f.Close()
	}
	return m
}

// cpuModel is the first "model name" of /proc/cpuinfo's lines ("" when
// there is none, as on some ARM kernels).
func cpuModel(sc *bufio.Scanner) string {
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// withHost fills the CPUs and model of m (nil: none given) from host,
// keeping its floor.
func withHost(m *Machine, host Machine) *Machine {
	out := host
	if m != nil {
		out.Floor, out.FloorMilliseconds, out.Note = m.Floor, m.FloorMilliseconds, m.Note
	}
	return &out
}

// String reads e.g. "2 CPUs, AMD EPYC 7B13; floor 21.50s (item value)".
func (m *Machine) String() string {
	if m == nil {
		return "not recorded"
	}
	cpus, model := "CPUs unknown", m.CPUModel
	if m.CPUs > 0 {
		cpus = fmt.Sprintf("%d CPUs", m.CPUs)
	}
	if model == "" {
		model = "CPU model unknown"
	}
	s := cpus + ", " + model
	if m.FloorMilliseconds > 0 {
		s += fmt.Sprintf("; floor %.2fs (%s)", m.FloorMilliseconds/1000, m.Floor)
	}
	if m.Note != "" {
		s += "; " + m.Note
	}
	return s
}

// SpeedNote says how this machine compares with the baseline's: the ratio
// of their floors' times when both measured the same floor.
func SpeedNote(baseline, current *Machine) string {
	switch {
	case baseline == nil || baseline.FloorMilliseconds <= 0:
		return "the baseline has no floor time: this machine's speed is not compared"
	case current == nil || current.FloorMilliseconds <= 0:
		return "this run has no floor time: this machine's speed is not compared"
	case baseline.Floor != current.Floor:
		return fmt.Sprintf("the floors differ (%s here, %s in the baseline): this machine's speed is not compared",
			current.Floor, baseline.Floor)
	}
	return fmt.Sprintf("this machine's floor is %.2f× the baseline's (%.2fs here, %.2fs there): its times scale with that, its ratios should not",
		current.FloorMilliseconds/baseline.FloorMilliseconds, current.FloorMilliseconds/1000, baseline.FloorMilliseconds/1000)
}
