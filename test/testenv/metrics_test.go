package testenv

import (
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

func sampleWith(labels map[string]string, m *dto.Metric) *dto.Metric {
	for name, v := range labels {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(name), Value: proto.String(v)})
	}
	return m
}

func TestSumSamples(t *testing.T) {
	counter := func(v float64) *dto.Metric { return &dto.Metric{Counter: &dto.Counter{Value: proto.Float64(v)}} }
	family := &dto.MetricFamily{Metric: []*dto.Metric{
		sampleWith(map[string]string{"kind": "APIRule", "op": "create"}, counter(3)),
		sampleWith(map[string]string{"kind": "APIRule", "op": "delete"}, counter(2)),
		sampleWith(map[string]string{"kind": "RateLimit", "op": "create"}, counter(5)),
		sampleWith(nil, &dto.Metric{Gauge: &dto.Gauge{Value: proto.Float64(7)}}),
	}}
	cases := map[string]struct {
		want map[string]string
		sum  float64
	}{
		"every sample":           {want: nil, sum: 17},
		"one label":              {want: map[string]string{"kind": "APIRule"}, sum: 5},
		"two labels":             {want: map[string]string{"kind": "APIRule", "op": "delete"}, sum: 2},
		"a value no sample has":  {want: map[string]string{"kind": "Gateway"}, sum: 0},
		"a label no sample has":  {want: map[string]string{"reason": "x"}, sum: 0},
		"one label of two wrong": {want: map[string]string{"kind": "RateLimit", "op": "delete"}, sum: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(SumSamples(family, tc.want)).To(Equal(tc.sum))
		})
	}
	NewWithT(t).Expect(SumSamples(nil, nil)).To(BeZero(), "no family: a series not registered yet")
}

func TestSampleValue(t *testing.T) {
	cases := map[string]struct {
		m    *dto.Metric
		want float64
	}{
		"counter":   {m: &dto.Metric{Counter: &dto.Counter{Value: proto.Float64(4)}}, want: 4},
		"gauge":     {m: &dto.Metric{Gauge: &dto.Gauge{Value: proto.Float64(-1)}}, want: -1},
		"untyped":   {m: &dto.Metric{Untyped: &dto.Untyped{Value: proto.Float64(9)}}, want: 9},
		"histogram": {m: &dto.Metric{Histogram: &dto.Histogram{SampleCount: proto.Uint64(12), SampleSum: proto.Float64(3)}}, want: 12},
		"summary":   {m: &dto.Metric{Summary: &dto.Summary{SampleCount: proto.Uint64(6), SampleSum: proto.Float64(1)}}, want: 6},
		"no value":  {m: &dto.Metric{}, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(SampleValue(tc.m)).To(Equal(tc.want))
		})
	}
}
