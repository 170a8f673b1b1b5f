package metrale_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"metrale.dev/metrale"
)

// The handle types: every exported method of each must answer a nil, a
// zero-value or a closed receiver with an error (or a zero answer), never
// a panic. Methods are found by reflection, so a new one is covered too.
var handleTypes = []reflect.Type{
	reflect.TypeOf((*metrale.Context)(nil)),
	reflect.TypeOf((*metrale.Buffer)(nil)),
	reflect.TypeOf((*metrale.PinnedBuffer)(nil)),
	reflect.TypeOf((*metrale.Stream)(nil)),
	reflect.TypeOf((*metrale.Event)(nil)),
	reflect.TypeOf((*metrale.Graph)(nil)),
	reflect.TypeOf((*metrale.Kernel)(nil)),
}

// callZero calls method m of recv with every argument zero (nil pointers,
// empty slices, zero numbers) and returns its results or the panic.
func callZero(recv reflect.Value, m reflect.Method) (out []reflect.Value, panicked interface{}) {
	defer func() { panicked = recover() }()
	fn := recv.Method(m.Index)
	ft := fn.Type()
	args := make([]reflect.Value, ft.NumIn())
	for i := range args {
		args[i] = reflect.Zero(ft.In(i))
	}
	if ft.IsVariadic() {
		return fn.CallSlice(args), nil
	}
	return fn.Call(args), nil
}

var errorType = reflect.TypeOf((*error)(nil)).Elem()

// checkAnswers fails on a panic, and on a nil error from a method other
// than Close (Close of a nil or closed handle is nil: Close is idempotent).
func checkAnswers(t *testing.T, what string, recv reflect.Value, wantErr bool) {
	t.Helper()
	for i := 0; i < recv.Type().NumMethod(); i++ {
		m := recv.Type().Method(i)
		out, p := callZero(recv, m)
		if p != nil {
			t.Errorf("%s.%s panicked: %v", what, m.Name, p)
			continue
		}
		if !wantErr || m.Name == "Close" || len(out) == 0 || out[len(out)-1].Type() != errorType {
			continue
		}
		err, _ := out[len(out)-1].Interface().(error)
		if err == nil {
			t.Errorf("%s.%s returned no error", what, m.Name)
		} else if !errors.Is(err, metrale.ErrClosed) && !errors.Is(err, metrale.ErrInvalidArgument) {
			t.Errorf("%s.%s: %v, want ErrClosed or ErrInvalidArgument", what, m.Name, err)
		}
	}
}

func TestNilHandlesAnswerWithErrors(t *testing.T) {
	for _, ht := range handleTypes {
		checkAnswers(t, "nil "+ht.String(), reflect.Zero(ht), true)
		checkAnswers(t, "zero "+ht.String(), reflect.New(ht.Elem()), true)
	}
	var nilErr *metrale.Error
	checkAnswers(t, "nil *metrale.Error", reflect.ValueOf(nilErr), false)
}

func TestNilBuffersInFunctionsAreErrors(t *testing.T) {
	var nb *metrale.Buffer
	for name, f := range map[string]func() error{
		"Upload":          func() error { return metrale.Upload(nb, []uint32{1}) },
		"Upload empty":    func() error { return metrale.Upload(nb, []uint32{}) },
		"Download":        func() error { return metrale.Download(nb, make([]float64, 2)) },
		"Download empty":  func() error { return metrale.Download(nb, []float64(nil)) },
		"PackArgs":        func() error { _, err := metrale.PackArgs(uint32(1), nb); return err },
		"PackArgs first":  func() error { _, err := metrale.PackArgs(nb); return err },
		"PackArgs closed": func() error { _, err := metrale.PackArgs(&metrale.Buffer{}); return err },
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", name, p)
				}
			}()
			if err := f(); !errors.Is(err, metrale.ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
			}
		}()
	}
}

// liveHandles makes one handle of each type on a fresh context.
func liveHandles(t *testing.T) (*metrale.Context, map[reflect.Type]interface{}) {
	ctx := testContext(t, 0)
	buf, err1 := ctx.Alloc(64)
	pin, err2 := ctx.AllocPinned(64)
	s, err3 := ctx.NewStream()
	e, err4 := ctx.NewEvent(true)
	k, err5 := ctx.Kernel("test_kernels", "fill_u32")
	err6 := s.BeginCapture()
	g, err7 := s.EndCapture()
	for _, err := range []error{err1, err2, err3, err4, err5, err6, err7} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return ctx, map[reflect.Type]interface{}{
		handleTypes[0]: ctx, handleTypes[1]: buf, handleTypes[2]: pin, handleTypes[3]: s,
		handleTypes[4]: e, handleTypes[5]: g, handleTypes[6]: k,
	}
}

// Closed handles, and handles of a closed context: errors, never panics.
func TestClosedHandlesAnswerWithErrors(t *testing.T) {
	for _, closeCtx := range []bool{false, true} {
		ctx, hs := liveHandles(t)
		for _, ht := range handleTypes[1:] {
			if err := hs[ht].(interface{ Close() error }).Close(); err != nil {
				t.Fatal(err)
			}
		}
		if closeCtx {
			ctx.Close()
		}
		for _, ht := range handleTypes {
			if ht == handleTypes[0] && !closeCtx {
				continue // still open in this round
			}
			checkAnswers(t, fmt.Sprintf("closed %s (context closed: %v)", ht, closeCtx), reflect.ValueOf(hs[ht]), true)
		}
	}
}

// Live handles with zero arguments (nil handles among them): no panic.
func TestLiveHandlesTakeNilArguments(t *testing.T) {
	for _, ht := range handleTypes {
		for i := 0; i < ht.NumMethod(); i++ {
			m := ht.Method(i)
			ctx, hs := liveHandles(t)
			if _, p := callZero(reflect.ValueOf(hs[ht]), m); p != nil {
				t.Errorf("live %s.%s with zero arguments panicked: %v", ht, m.Name, p)
			}
			for _, h := range handleTypes[1:] {
				hs[h].(interface{ Close() error }).Close()
			}
			ctx.Close()
		}
	}
}
