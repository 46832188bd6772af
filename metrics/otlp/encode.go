package otlp

import (
	"fmt"
	"maps"
	"slices"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// scopeName names the instrumentation scope of every metric, as the SDK's
// meter of that name did.
const scopeName = "github.com/runner-reaper/runner-reaper"

// request is the sweep's figures as one resource's metrics: a gauge a
// family, in the order the families first appear, each sample a data point
// stamped now.
func request(res sweep.Result, instance string, resource map[string]string, now time.Time) *metricpb.ResourceMetrics {
	fams := map[string]metrics.Family{}
	for _, f := range metrics.Families() {
		fams[f.Name] = f
	}
	byName := map[string]*metricpb.Metric{}
	var out []*metricpb.Metric
	for _, s := range append(metrics.Samples(res), metrics.SuccessSamples(res)...) {
		f := fams[s.Name]
		m, ok := byName[s.Name]
		if !ok {
			m = &metricpb.Metric{Name: s.Name, Description: f.Help, Data: &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{}}}
			byName[s.Name] = m
			out = append(out, m)
		}
		attrs := make([]*commonpb.KeyValue, 0, len(s.Labels))
		for i, l := range s.Labels {
			attrs = append(attrs, str(f.Labels[i], l))
		}
		g := m.GetGauge()
		g.DataPoints = append(g.DataPoints, &metricpb.NumberDataPoint{
			Attributes:   attrs,
			TimeUnixNano: uint64(now.UnixNano()),
			Value:        &metricpb.NumberDataPoint_AsDouble{AsDouble: s.Value},
		})
	}
	attrs := maps.Clone(resource)
	if attrs == nil {
		attrs = map[string]string{}
	}
	attrs["service.name"] = "runner-reaper"
	attrs["service.instance.id"] = instance
	var kv []*commonpb.KeyValue
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		kv = append(kv, str(k, attrs[k]))
	}
	return &metricpb.ResourceMetrics{
		Resource:     &resourcepb.Resource{Attributes: kv},
		ScopeMetrics: []*metricpb.ScopeMetrics{{Scope: &commonpb.InstrumentationScope{Name: scopeName}, Metrics: out}},
	}
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// encode is an ExportMetricsServiceRequest holding rm. That message is one
// repeated field (1, resource_metrics); it is written here with protowire
// because its generated package also holds the gRPC service, which would
// link gRPC again.
func encode(rm *metricpb.ResourceMetrics) ([]byte, error) {
	b, err := proto.Marshal(rm)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	out := protowire.AppendTag(make([]byte, 0, len(b)+protowire.SizeTag(1)+protowire.SizeVarint(uint64(len(b)))), 1, protowire.BytesType)
	return protowire.AppendBytes(out, b), nil
}

// partialSuccess reads an ExportMetricsServiceResponse: its partial_success
// (field 1), whose rejected_data_points (1) and error_message (2) say what
// the receiver refused of a request it answered with success. A field seen
// twice merges as protobuf merges it (the last value of each wins); unknown
// fields are skipped, as protobuf's rules ask.
func partialSuccess(b []byte) (rejected int64, msg string, err error) {
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				n, l := protowire.ConsumeVarint(v)
				if l < 0 {
					return protowire.ParseError(l)
				}
				rejected = int64(n)
			case num == 2 && typ == protowire.BytesType:
				msg = string(v)
			}
			return nil
		})
	})
	if err != nil {
		return 0, "", fmt.Errorf("read the answer: %w", err)
	}
	return rejected, msg, nil
}

// eachField calls fn with each field of the message b: its number, its
// wire type and its value (a varint's bytes as written; a length-delimited
// field's contents).
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(num, typ, b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		v := b[:l]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v)
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[l:]
	}
	return nil
}
