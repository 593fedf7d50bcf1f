// Command writemodels writes the benchmark model files of BENCHMARKS.md's
// import table: a GGUF file with one 14336x4096 matrix per importable
// ggml type and a GPTQ (4-bit, group 128, act-order) safetensors file of
// the same shape, with random codes.
//
//	go run ./internal/testmodel/writemodels -o DIR
//	go run ./cmd/qgemv bench -model DIR/ffn.gguf -act a32
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/qgemv/qgemv/internal/testmodel"
)

func main() {
	dir := flag.String("o", ".", "output directory")
	rows := flag.Int("rows", 14336, "rows (outputs)")
	cols := flag.Int("cols", 4096, "columns (inputs), a multiple of 256")
	flag.Parse()
	if *rows < 1 || *cols < 256 || *cols%256 != 0 || *rows%8 != 0 {
		fmt.Fprintln(os.Stderr, "writemodels: -rows must be a positive multiple of 8 and -cols a positive multiple of 256")
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	r, c := *rows, *cols
	var ts []testmodel.GGUFTensor
	for _, typ := range []struct {
		name string
		id   uint32
	}{{"q4_0", 2}, {"q8_0", 8}, {"q4_1", 3}, {"q4_k", 12}} {
		ts = append(ts, testmodel.GGUFTensor{Name: "ffn_down." + typ.name, Type: typ.id, Dims: []uint64{uint64(c), uint64(r)}, Data: testmodel.Blocks(rng, typ.id, r, c)})
	}
	write(filepath.Join(*dir, "ffn.gguf"), testmodel.GGUF(map[string]string{"general.architecture": "llama"}, ts))
	var st []testmodel.STTensor
	for _, act := range []bool{false, true} {
		p := "ffn_down.gptq"
		if act {
			p += "_actorder"
		}
		for _, t := range testmodel.GPTQ(rng, c, r, 128, act) {
			t.Name = p + "." + t.Name
			st = append(st, t)
		}
	}
	write(filepath.Join(*dir, "ffn_gptq.safetensors"), testmodel.Safetensors(st))
}

func write(path string, b []byte) {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "writemodels:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d bytes\n", path, len(b))
}
