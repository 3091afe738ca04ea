package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"backfill/wire"
)

// Namespace prefixes every backfill metric name.
const Namespace = "backfill"

// NewRegistry returns a registry holding the Go runtime and process
// collectors and this process's ZeroMQ traffic. It is pedantic: a
// collector that describes its metrics wrongly fails the scrape instead of
// exporting something inconsistent.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		wireCollector{},
	)
	return reg
}

// Labeled returns a Registerer that adds the label name=value to every
// metric registered through it: how one process tells its supervisors
// apart.
func Labeled(reg prometheus.Registerer, name, value string) prometheus.Registerer {
	return prometheus.WrapRegistererWith(prometheus.Labels{name: value}, reg)
}

var (
	wireFrames = prometheus.NewDesc(Namespace+"_wire_frames_total",
		"ZeroMQ frames this process received (in) and sent (out), by message kind.",
		[]string{"direction", "kind"}, nil)
	wireBytes = prometheus.NewDesc(Namespace+"_wire_bytes_total",
		"Bytes of the ZeroMQ frames this process received (in) and sent (out), by message kind.",
		[]string{"direction", "kind"}, nil)
)

// wireCollector reads wire.Traffic when scraped.
type wireCollector struct{}

func (wireCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- wireFrames
	ch <- wireBytes
}

func (wireCollector) Collect(ch chan<- prometheus.Metric) {
	in, out := wire.Traffic()
	for _, d := range []struct {
		name string
		l    []wire.FrameCount
	}{{"in", in}, {"out", out}} {
		for _, c := range d.l {
			kind := c.Kind.String()
			if c.Kind == 0 {
				kind = "bad" // frames that did not decode
			} else if kind == "unknown" {
				kind = "kind-" + strconv.Itoa(int(c.Kind))
			}
			ch <- prometheus.MustNewConstMetric(wireFrames, prometheus.CounterValue, float64(c.Frames), d.name, kind)
			ch <- prometheus.MustNewConstMetric(wireBytes, prometheus.CounterValue, float64(c.Bytes), d.name, kind)
		}
	}
}
