package framework

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// Usage is a process's CPU time and memory, as the kernel accounts them.
type Usage struct {
	// CPUSeconds is the user and system time used so far.
	CPUSeconds float64
	// RSS is the resident set now, PeakRSS its high-water mark (VmHWM),
	// in bytes.
	RSS, PeakRSS uint64
}

// ProcessUsage reads a process's usage from /proc.
func ProcessUsage(pid int) (Usage, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return Usage{}, err
	}
	stat, err := p.Stat()
	if err != nil {
		return Usage{}, err
	}
	status, err := p.NewStatus()
	if err != nil {
		return Usage{}, err
	}
	return Usage{CPUSeconds: stat.CPUTime(), RSS: status.VmRSS, PeakRSS: status.VmHWM}, nil
}

// CPUSnapshot is the machine's CPU time and that of some processes, by
// name, at one moment.
type CPUSnapshot struct {
	At          time.Time
	total, idle float64
	processes   map[string]float64
}

// TakeCPUSnapshot reads the CPU time of the machine and of the processes
// (by name); processes that cannot be read are left out.
func TakeCPUSnapshot(pids map[string]int) CPUSnapshot {
	s := CPUSnapshot{At: time.Now(), processes: map[string]float64{}}
	if fs, err := procfs.NewDefaultFS(); err == nil {
		if stat, err := fs.Stat(); err == nil {
			c := stat.CPUTotal
			s.total = c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
			s.idle = c.Idle + c.Iowait
		}
	}
	for name, pid := range pids {
		if u, err := ProcessUsage(pid); err == nil {
			s.processes[name] = u.CPUSeconds
		}
	}
	return s
}

// CPUDelta is the CPU time used between two snapshots.
type CPUDelta struct {
	Wall time.Duration
	// Seconds is the CPU time of each process read in both snapshots.
	Seconds map[string]float64
	// Busy is the share (0–1) of the machine's CPU time not idle, or -1
	// when unknown.
	Busy float64
}

// Since returns the CPU time used from before to s.
func (s CPUSnapshot) Since(before CPUSnapshot) CPUDelta {
	d := CPUDelta{Wall: s.At.Sub(before.At), Seconds: map[string]float64{}, Busy: -1}
	for name, v := range s.processes {
		if b, ok := before.processes[name]; ok {
			d.Seconds[name] = v - b
		}
	}
	if total := s.total - before.total; total > 0 {
		d.Busy = 1 - (s.idle-before.idle)/total
	}
	return d
}

// String reads e.g. "etcd 1.2s, kube-apiserver 3.4s over 10.00s; all 2
// CPUs 87% busy".
func (d CPUDelta) String() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(d.Seconds)) {
		parts = append(parts, fmt.Sprintf("%s %.1fs", name, d.Seconds[name]))
	}
	busy := "-"
	if d.Busy >= 0 {
		busy = fmt.Sprintf("%.0f%%", 100*d.Busy)
	}
	return fmt.Sprintf("%s over %.2fs; all %d CPUs %s busy", strings.Join(parts, ", "), d.Wall.Seconds(), runtime.NumCPU(), busy)
}
