package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

func TestParse(t *testing.T) {
	in := `goos: linux
BenchmarkCRDCacheMemory-2   	       1	1234567 ns/op	        12.50 MiB-heap-0-crds	        52.10 MiB-heap-500-crds	      1843 B-per-crd
BenchmarkOther/sub	  100	  42 ns/op
PASS
`
	var echo bytes.Buffer
	got, err := parse(strings.NewReader(in), &echo, map[string]bool{"B-per-crd": true})
	if err != nil {
		t.Fatal(err)
	}
	want := framework.PerfData{Version: framework.PerfDataVersion, DataItems: []framework.DataItem{
		{Unit: "ns", Data: map[string]float64{"op": 1234567}, Labels: map[string]string{"Metric": "BenchmarkCRDCacheMemory"}},
		{Unit: "MiB", Data: map[string]float64{"heap-0-crds": 12.5, "heap-500-crds": 52.1}, Labels: map[string]string{"Metric": "BenchmarkCRDCacheMemory"}},
		{Unit: "ns", Data: map[string]float64{"op": 42}, Labels: map[string]string{"Metric": "BenchmarkOther/sub"}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parse:\n got %+v\nwant %+v", got, want)
	}
	if echo.String() != in {
		t.Errorf("input not copied through:\n%s", echo.String())
	}
}
