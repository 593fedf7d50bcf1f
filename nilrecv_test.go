package qgemv_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/qgemv/qgemv"
)

// TestNilAndZeroReceivers calls every exported method of the API's types
// on a nil pointer and on a zero value (not made by Open, Load or
// NewBuffer) with zero arguments: each returns (an error where it has
// one) instead of panicking.
func TestNilAndZeroReceivers(t *testing.T) {
	for _, v := range []any{
		(*qgemv.Engine)(nil), &qgemv.Engine{},
		(*qgemv.Matrix)(nil), &qgemv.Matrix{},
		(*qgemv.Buffer)(nil), &qgemv.Buffer{},
		(*qgemv.Weights)(nil), &qgemv.Weights{},
		&qgemv.Weight{}, // a nil *Weight's methods are its Matrix's, reached through the nil struct: Go's wrapper panics first
		(*qgemv.Model)(nil), &qgemv.Model{},
		(*qgemv.SharedInput)(nil), &qgemv.SharedInput{},
		(*qgemv.Sequence)(nil), &qgemv.Sequence{},
		(*qgemv.TensorError)(nil), &qgemv.TensorError{},
	} {
		rv := reflect.ValueOf(v)
		what := fmt.Sprintf("%T", v)
		if rv.IsNil() {
			what = "nil " + what
		} else {
			what = "zero " + what
		}
		for i := 0; i < rv.NumMethod(); i++ {
			m := rv.Method(i)
			name := rv.Type().Method(i).Name
			args := make([]reflect.Value, m.Type().NumIn())
			for j := range args {
				args[j] = reflect.Zero(m.Type().In(j))
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s.%s: panic: %v", what, name, p)
					}
				}()
				if m.Type().IsVariadic() {
					m.CallSlice(args)
				} else {
					m.Call(args)
				}
			}()
		}
	}
}
