package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func ctrlRegistry() prometheus.Gatherer { return ctrlmetrics.Registry }
