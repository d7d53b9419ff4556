package framework

// Class is what a figure is to the regression gate: the comparison with
// the baseline fails a run only on a gated figure.
type Class string

// The classes.
const (
	// ClassGated figures do not depend on the machine's speed: ratios of
	// two figures of the same run (a phase over its floor), counts
	// (requests, reconciles, writes, allocations) and memory.
	ClassGated Class = "gated"
	// ClassInfo figures are printed beside the baseline's, never gated:
	// absolute times and CPU seconds measure the machine as much as the
	// code, and a figure a bench exempts is too noisy to compare.
	ClassInfo Class = "info"
)

// unitClasses are the classes of the benchmarks' units. A unit not listed
// is information: the gate fails only on what it knows not to depend on
// the machine's speed.
var unitClasses = map[string]Class{
	UnitRatio:        ClassGated,
	UnitCount:        ClassGated,
	UnitAllocs:       ClassGated,
	UnitBytes:        ClassGated,
	"KiB":            ClassGated,
	UnitMiB:          ClassGated,
	UnitNanoseconds:  ClassInfo,
	UnitMilliseconds: ClassInfo,
	UnitSeconds:      ClassInfo,
}

// UnitClass is the class of the figures of a unit.
func UnitClass(unit string) Class {
	if c, ok := unitClasses[unit]; ok {
		return c
	}
	return ClassInfo
}

// Exemption makes a figure of a gated unit information, for a reason the
// report prints: e.g. a ratio of a handful of samples that swings more
// between two runs on the same machine than any tolerance would allow
// (the bench bounds it in the run instead).
type Exemption struct {
	// Metric is the data item's Metric label; Key the value's name in its
	// data ("" for every value of the item).
	Metric, Key string
	// Labels, when set, are other labels the item must carry.
	Labels map[string]string
	// Unit, when set, limits the exemption to the item of that unit.
	Unit string
	Why  string
}

// matches reports whether the exemption covers a value of an item.
func (e Exemption) matches(labels map[string]string, unit, key string) bool {
	if e.Metric != labels["Metric"] || e.Key != "" && e.Key != key || e.Unit != "" && e.Unit != unit {
		return false
	}
	for k, v := range e.Labels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Classify is the class of a value of an item (its labels and unit): its
// unit's, unless an exemption covers it.
func Classify(labels map[string]string, unit, key string, exempt []Exemption) Class {
	for _, e := range exempt {
		if e.matches(labels, unit, key) {
			return ClassInfo
		}
	}
	return UnitClass(unit)
}

// String names what the exemption covers: "Metric=M,Controller=c (ratio)
// Key" ("every value" without a key).
func (e Exemption) String() string {
	labels := map[string]string{"Metric": e.Metric}
	for k, v := range e.Labels {
		labels[k] = v
	}
	s := ItemName(labels)
	if e.Unit != "" {
		s += " (" + e.Unit + ")"
	}
	if e.Key == "" {
		return s + " every value"
	}
	return s + " " + e.Key
}
