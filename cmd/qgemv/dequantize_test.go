package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout/gguf"
)

// TestDequantizeMixed: qgemv dequantize of every tensor of the mixed-type
// fixture (one tensor of every type qgemv imports, written by gguf-py)
// equals gguf-py's own dequantization bit for bit; the file's matrices
// load and multiply (bench -model); a .qgv import dequantizes to the same
// bytes; bad requests are errors.
func TestDequantizeMixed(t *testing.T) {
	const src = "../../layout/gguf/testdata/mixed.gguf"
	exp, err := gguf.Open("../../layout/gguf/testdata/mixed_expected.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	for _, tn := range f.Tensors {
		out := filepath.Join(dir, tn.Name+".f32")
		if err := cmdDequantize([]string{src, "-tensor", tn.Name, "-o", out}); err != nil {
			t.Fatalf("%s: %v", tn.Name, err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		e, err := exp.Tensor(tn.Name)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := e.Float32s()
		var wb []byte
		for _, v := range want {
			wb = binary.LittleEndian.AppendUint32(wb, math.Float32bits(v))
		}
		if !bytes.Equal(got, wb) {
			t.Fatalf("%s (%s): qgemv dequantize differs from gguf-py (%d bytes, want %d)", tn.Name, tn.Type, len(got), len(wb))
		}
		if len(tn.Dims) == 2 && gguf.Lossless(tn.Type) { // the .qgv import holds the same values
			q := filepath.Join(dir, tn.Name+".qgv")
			if err := cmdImport([]string{src, "-tensor", tn.Name, "-o", q}); err != nil {
				t.Fatalf("import %s: %v", tn.Name, err)
			}
			out2 := filepath.Join(dir, tn.Name+".2.f32")
			if err := cmdDequantize([]string{q, "-o", out2}); err != nil {
				t.Fatalf("%s.qgv: %v", tn.Name, err)
			}
			if got2, _ := os.ReadFile(out2); !bytes.Equal(got2, wb) {
				t.Fatalf("%s.qgv: dequantized values differ", tn.Name)
			}
		}
	}
	for _, act := range []string{"a8", "a16", "a32"} {
		if err := cmdBench([]string{"-model", src, "-act", act, "-mintime", "1ms", "-quiet", "-hugepages=false", "-json"}); err != nil {
			t.Fatalf("bench -model -act %s: %v", act, err)
		}
	}
	for _, args := range [][]string{
		{src, "-tensor", "missing", "-o", filepath.Join(dir, "x.f32")},
		{src, "-o", filepath.Join(dir, "x.f32")},
		{src, "-tensor", "blk.0.attn_q.weight"},
		{filepath.Join(dir, "none.gguf"), "-tensor", "a", "-o", filepath.Join(dir, "x.f32")},
	} {
		if err := cmdDequantize(args); err == nil {
			t.Errorf("dequantize %v: no error", args)
		} else if strings.Contains(args[0], "mixed") && len(args) > 2 && args[2] == "missing" && !strings.Contains(err.Error(), "missing") {
			t.Errorf("dequantize %v: %v does not name the tensor", args, err)
		}
	}
}
