package sidecar

import (
	"reflect"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestEventSpanMethods: eventSpan defines every exported method of
// sdktrace.ReadOnlySpan itself. One the SDK adds later would be promoted
// from the embedded nil interface and panic in the exporter; calling each
// here fails first.
func TestEventSpanMethods(t *testing.T) {
	var s sdktrace.ReadOnlySpan = &eventSpan{}
	it := reflect.TypeOf((*sdktrace.ReadOnlySpan)(nil)).Elem()
	v := reflect.ValueOf(s)
	n := 0
	for i := range it.NumMethod() {
		m := it.Method(i)
		if !m.IsExported() {
			continue
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: %v (eventSpan lacks it)", m.Name, r)
				}
			}()
			v.MethodByName(m.Name).Call(nil)
		}()
		n++
	}
	if n < 17 {
		t.Errorf("only %d methods called", n)
	}
}
