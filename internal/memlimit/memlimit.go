package memlimit

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	"github.com/portico-dev/portico/internal/contract"
)

// EnvGoMemLimit is the Go runtime's own variable; when the user sets it,
// the runtime has already applied it and Portico leaves it alone.
const EnvGoMemLimit = "GOMEMLIMIT"

// Decision is what a process does about its soft memory limit.
type Decision struct {
	// Container is the container's memory limit in bytes, 0 when unknown.
	Container int64
	// Soft is the soft memory limit to set in bytes; 0 leaves the runtime's
	// (none, or the user's $GOMEMLIMIT).
	Soft int64
	// UserSet is true when $GOMEMLIMIT is set and so kept.
	UserSet bool
}

// SoftLimit decides the soft memory limit from the value of
// $PORTICO_MEMORY_LIMIT (bytes, as the downward API's resourceFieldRef
// renders limits.memory) and whether $GOMEMLIMIT is set. An empty value or
// one of zero or less means no limit is known. A value that is not an
// integer is an error, and no limit is set. The downward API reports the
// node's allocatable memory when the container has no memory limit: nine
// tenths of that is a limit the heap only nears when the node runs out, so
// it is kept like any other.
func SoftLimit(containerLimit string, goMemLimitSet bool) (Decision, error) {
	if goMemLimitSet {
		return Decision{UserSet: true}, nil
	}
	value := strings.TrimSpace(containerLimit)
	if value == "" {
		return Decision{}, nil
	}
	bytes, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return Decision{}, fmt.Errorf("$%s must be the container's memory limit in bytes, not %q", contract.EnvMemoryLimit, containerLimit)
	}
	if bytes <= 0 {
		return Decision{}, nil
	}
	// bytes - bytes/10 rather than bytes*9/10, which overflows near MaxInt64.
	return Decision{Container: bytes, Soft: bytes - bytes/10}, nil
}

// Apply decides the soft memory limit from the environment (lookupEnv is
// os.LookupEnv outside tests), sets it and logs what it did at info, or the
// error, on which it sets nothing: the process goes on as Go runs by
// default.
func Apply(log logr.Logger, lookupEnv func(string) (string, bool)) Decision {
	// The runtime takes an empty $GOMEMLIMIT for an unset one.
	goMemLimit, _ := lookupEnv(EnvGoMemLimit)
	containerLimit, _ := lookupEnv(contract.EnvMemoryLimit)
	d, err := SoftLimit(containerLimit, goMemLimit != "")
	switch {
	case err != nil:
		log.Error(err, "No Go memory limit set")
	case d.UserSet:
		log.Info("Keeping the Go memory limit of $"+EnvGoMemLimit, "bytes", debug.SetMemoryLimit(-1))
	case d.Soft > 0:
		debug.SetMemoryLimit(d.Soft)
		log.Info("Go memory limit set to 90% of the container's memory limit", "bytes", d.Soft, "containerBytes", d.Container)
	}
	return d
}
