//go:build !noasm && !purego

package cpu

import (
	"reflect"
	"slices"
	"testing"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// TestDisabled: EnvDisable's names are parsed once for the kernel sets,
// "amx" and the names that are neither (generic cannot be disabled).
func TestDisabled(t *testing.T) {
	t.Setenv(EnvDisable, " AVX2, amx ,cpu-avxvnni,,bogus,generic")
	sets, unknown := Disabled()
	if !slices.Equal(sets, []ISA{AVX2, AVXVNNI}) || !slices.Equal(unknown, []string{"bogus", "generic"}) {
		t.Errorf("sets %v, unknown %q", sets, unknown)
	}
	if !AMXDisabled() {
		t.Error("amx not disabled")
	}
	t.Setenv(EnvDisable, "avx2")
	if AMXDisabled() {
		t.Error("amx disabled by avx2")
	}
}

// TestHelpersFollowDisable: the activation quantizer, SwiGLU and the
// weight encoders leave AVX-512 where EnvDisable names avx512vnni, and
// run in Go where it leaves only the generic set.
func TestHelpersFollowDisable(t *testing.T) {
	defer func() { // as init left them
		d, _ := Disabled()
		installHelpers(d)
	}()
	fn := func(f any) uintptr { return reflect.ValueOf(f).Pointer() }
	avx512 := hasAll([]string{"AVX", "AVX2", "AVX512F"})
	if !helperAllowed([]string{"AVX", "AVX2"}, []ISA{AVX512VNNI}) {
		t.Skip("no kernel set but generic with AVX2 here: no assembly helpers")
	}
	installHelpers(nil)
	if avx512 && (encoderName != "avx512" || swigluAsm == nil) {
		t.Errorf("nothing disabled: encoder %q, SwiGLU asm %v", encoderName, swigluAsm != nil)
	}
	if hasAll(quantizers[0].requires) && fn(quantAsm) != fn(asm.QuantizeA8Avx512) {
		t.Error("nothing disabled: the quantizer is not AVX-512's")
	}
	if avx512 && fn(nearestKernels[2]) != fn(asm.NearestV2Avx512) {
		t.Error("nothing disabled: the k-means assignment is not AVX-512's")
	}
	installHelpers([]ISA{AVX512VNNI})
	if fn(nearestKernels[2]) != fn(asm.NearestV2Avx2) {
		t.Error("avx512vnni disabled: the k-means assignment is not AVX2's")
	}
	if encoderName != "avx2" || swigluAsm != nil || quantAsm == nil || fn(quantAsm) != fn(asm.QuantizeA8Avx2) || !layout.HasA8Kernel() {
		t.Errorf("avx512vnni disabled: encoder %q, SwiGLU asm %v, quantizer avx2 %v", encoderName, swigluAsm != nil, quantAsm != nil && fn(quantAsm) == fn(asm.QuantizeA8Avx2))
	}
	var all []ISA
	for _, k := range kernelSets {
		if k.isa != Generic {
			all = append(all, k.isa)
		}
	}
	installHelpers(all)
	if encoderName != "" || swigluAsm != nil || quantAsm != nil || layout.HasA8Kernel() || nearestKernels != nil {
		t.Errorf("every set but generic disabled: encoder %q, SwiGLU asm %v, quantizer asm %v", encoderName, swigluAsm != nil, quantAsm != nil)
	}
	// the encoders' output does not depend on the form: Q4G128 quantizes the same
	w := make([]float32, 4*256)
	for i := range w {
		w[i] = float32(i%37) - 18.5 + float32(i%7)/8
	}
	goQ, err := layout.QuantizeQ4G128(w, 4, 256, layout.Search)
	if err != nil {
		t.Fatal(err)
	}
	installHelpers(nil)
	asmQ, err := layout.QuantizeQ4G128(w, 4, 256, layout.Search)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(goQ, asmQ) {
		t.Error("Q4G128 quantization differs between the Go and the assembly encoders")
	}
}
