package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeF32(t *testing.T, path string, v []float32) {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestQuantizeInspect(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "w.f32")
	w := make([]float32, 3*200)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)))
	}
	writeF32(t, in, w)
	out := filepath.Join(dir, "w.qgv")
	if err := cmdQuantize([]string{"-rows", "3", "-cols", "200", "-o", out, in}); err != nil {
		t.Fatal(err)
	}
	if err := cmdInspect([]string{out}); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"bits4g64", "bits1row", "sparse12g32"} {
		o := filepath.Join(dir, format+".qgv")
		if err := cmdQuantize([]string{"-format", format, "-rows", "3", "-cols", "200", "-o", o, in}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if err := cmdInspect([]string{o}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
	}
	// Bad inputs are errors.
	for _, args := range [][]string{
		{"-rows", "3", "-cols", "201", "-o", out, in}, // size mismatch
		{"-rows", "0", "-cols", "200", "-o", out, in}, // bad shape
		{"-rows", "3", "-cols", "200", in},            // no -o
		{"-rows", "3", "-cols", "200", "-method", "x", "-o", out, in},
		{"-rows", "3", "-cols", "200", "-format", "q8", "-o", out, in},
	} {
		if err := cmdQuantize(args); err == nil {
			t.Errorf("quantize %v: no error", args)
		}
	}
	bad := filepath.Join(dir, "bad.qgv")
	raw, _ := os.ReadFile(out)
	os.WriteFile(bad, raw[:len(raw)-1], 0o644)
	if err := cmdInspect([]string{bad}); err == nil || !strings.Contains(err.Error(), "qgv") {
		t.Errorf("inspect of a truncated file: %v", err)
	}
}

func TestBenchSmall(t *testing.T) {
	for _, format := range []string{"q4g128", "bits2g64", "bits3row", "sparse12g128"} {
		for _, act := range []string{"a8", "a16", "a32"} {
			if err := cmdBench([]string{"-format", format, "-hidden", "256", "-intermediate", "384", "-iters", "3", "-working-set-mib", "0", "-json", "-act", act}); err != nil {
				t.Fatalf("%s %s: %v", format, act, err)
			}
		}
	}
	for _, args := range [][]string{{"-iters", "0"}, {"-act", "a4"}, {"-format", "bits5g64"}, {"-hidden", "0"}, {"extra"}, {"-backend", "nope"}} {
		if err := cmdBench(args); err == nil {
			t.Errorf("bench %v: no error", args)
		}
	}
}

func TestInfo(t *testing.T) {
	if err := cmdInfo(nil); err != nil {
		t.Fatal(err)
	}
	if err := cmdInfo([]string{"-backend", "cpu-generic"}); err != nil {
		t.Fatal(err)
	}
}
