package qgemv_test

import (
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/testmodel"
	"github.com/qgemv/qgemv/layout"
)

// A 2x256 matrix whose rows are constant 1 and constant -0.5 multiplied by
// a vector of ones.
func Example() {
	rows, cols := 2, 256
	w := make([]float32, rows*cols)
	for c := 0; c < cols; c++ {
		w[c] = 1
		w[cols+c] = -0.5
	}
	m, err := qgemv.Quantize(w, rows, cols, layout.MinMax)
	if err != nil {
		log.Fatal(err)
	}
	eng, err := qgemv.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	mat, err := eng.Load(m)
	if err != nil {
		log.Fatal(err)
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = 1
	}
	y := make([]float32, rows)
	if err := mat.Mul(y, x, 1, qgemv.A32); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("A32: %.1f %.1f\n", y[0], y[1])
	if err := mat.Mul(y, x, 1, qgemv.A8); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("A8:  %.1f %.1f\n", y[0], y[1])
	// Output:
	// A32: 256.0 -128.0
	// A8:  256.0 -128.0
}

// Batched multiply: four vectors share every weight load. Vector b
// selects column b, so the results are the (4-bit) weights of w = sin(i).
func ExampleMatrix_Mul_batch() {
	rows, cols, batch := 3, 130, 4
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)))
	}
	m, _ := qgemv.Quantize(w, rows, cols, layout.Search)
	eng, _ := qgemv.Open(qgemv.WithBackend("cpu"))
	defer eng.Close()
	mat, _ := eng.Load(m)
	x := make([]float32, batch*cols)
	for b := 0; b < batch; b++ {
		x[b*cols+b] = 1 // vector b selects column b
	}
	y := make([]float32, batch*rows)
	if err := mat.Mul(y, x, batch, qgemv.A32); err != nil {
		log.Fatal(err)
	}
	for b := 0; b < batch; b++ {
		fmt.Printf("column %d: %.2f %.2f %.2f\n", b, y[b*rows], y[b*rows+1], y[b*rows+2])
	}
	// Output:
	// column 0: 0.00 -0.92 0.68
	// column 1: 0.82 -0.79 -0.27
	// column 2: 0.96 0.00 -0.95
	// column 3: 0.14 0.92 -0.82
}

// Bad input is an error, never a panic.
func ExampleMatrix_Mul_errors() {
	m, _ := qgemv.Quantize(make([]float32, 4*128), 4, 128, layout.MinMax)
	eng, _ := qgemv.Open(qgemv.WithBackend("cpu"))
	mat, _ := eng.Load(m)
	fmt.Println(mat.Mul(make([]float32, 4), make([]float32, 100), 1, qgemv.A32))
	eng.Close()
	fmt.Println(mat.Mul(make([]float32, 4), make([]float32, 128), 1, qgemv.A32))
	// Output:
	// qgemv: mul: cpu: x has 100 elements, want batch 1 x 128 = 128
	// qgemv: engine or matrix is closed
}

// A 2-bit matrix with groups of 64 columns and integer zero points (so
// int8 activations work too), multiplied with float32 and fp16 inputs.
func ExampleEngine_Load_bits() {
	rows, cols := 2, 256
	w := make([]float32, rows*cols)
	for c := 0; c < cols; c++ {
		w[c] = float32(c%4) - 1 // row 0: -1, 0, 1, 2, ...
		w[cols+c] = 0.5         // row 1: constant
	}
	m, err := layout.QuantizeBits(w, rows, cols, 2, 64, layout.QuantOptions{IntegerZero: true})
	if err != nil {
		log.Fatal(err)
	}
	eng, _ := qgemv.Open()
	defer eng.Close()
	mat, err := eng.Load(m)
	if err != nil {
		log.Fatal(err)
	}
	x := make([]float32, cols)
	xh := make([]layout.FP16, cols)
	for i := range x {
		x[i], xh[i] = 1, layout.ToFP16(1)
	}
	y := make([]float32, rows)
	_ = mat.Mul(y, x, 1, qgemv.A32)
	fmt.Printf("%s A32: %.1f %.1f\n", mat.Format(), y[0], y[1])
	_ = mat.MulFP16(y, xh, 1)
	fmt.Printf("%s A16: %.1f %.1f\n", mat.Format(), y[0], y[1])
	_ = mat.Mul(y, x, 1, qgemv.A8)
	fmt.Printf("%s A8:  %.1f %.1f\n", mat.Format(), y[0], y[1])
	// Output:
	// Bits2G64 A32: 128.0 128.0
	// Bits2G64 A16: 128.0 128.0
	// Bits2G64 A8:  128.0 128.0
}

// A model file through the library: open it (memory-mapped), list its
// weight matrices, load them onto an engine, and run layer 0's
// projections in decode order, the matrices of a stage (q, k and v;
// gate and up) sharing one quantized input.
func ExampleOpenModel() {
	// A small LLaMA-shaped GGUF with random Q4_0 weights (qgemv genmodel
	// writes full-size ones; any .gguf or GPTQ/AWQ/HQQ .safetensors works).
	dir, err := os.MkdirTemp("", "qgemv-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.gguf")
	l := testmodel.Llama{Layers: 2, Hidden: 256, FFN: 512, KV: 128, Seed: 1}
	if _, err := l.WriteGGUFFile(path, testmodel.MixQ4_0); err != nil {
		log.Fatal(err)
	}

	md, err := qgemv.OpenModel(path)
	if err != nil {
		log.Fatal(err)
	}
	defer md.Close()
	fmt.Printf("%s: %d weight matrices, e.g. %s %s %dx%d\n", md.Format(), len(md.Tensors()),
		md.Tensors()[0].Name, md.Tensors()[0].Type, md.Tensors()[0].Rows, md.Tensors()[0].Cols)

	eng, err := qgemv.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	w, err := md.Load(eng) // every tensor; Failed() lists those that cannot load
	if err != nil {
		log.Fatal(err)
	}
	for _, st := range w.Stages() {
		if st.Layer != 0 {
			break
		}
		in, err := eng.NewSharedInput(st.Matrices()...) // keep it to reuse every step
		if err != nil {
			log.Fatal(err)
		}
		x := make([]float32, st.Weights[0].Cols())
		for i := range x {
			x[i] = float32(math.Sin(float64(i)))
		}
		if err := in.Set(x, 1, qgemv.A8); err != nil { // quantized once
			log.Fatal(err)
		}
		for i, wt := range st.Weights {
			y := make([]float32, wt.Rows())
			if err := in.Mul(i, y); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%-11s %s %3dx%d y[0] = %.3f\n", wt.Info.Kind, wt.Format(), wt.Rows(), wt.Cols(), y[0])
		}
	}
	// Output:
	// gguf: 14 weight matrices, e.g. blk.0.ffn_down.weight Q4_0 256x512
	// attn_q      Q4_0 256x256 y[0] = -0.994
	// attn_k      Q4_0 128x256 y[0] = -0.322
	// attn_v      Q4_0 128x256 y[0] = -0.011
	// attn_output Q4_0 256x256 y[0] = 1.240
	// ffn_gate    Q4_0 512x256 y[0] = 0.103
	// ffn_up      Q4_0 512x256 y[0] = 0.559
	// ffn_down    Q4_0 256x512 y[0] = -0.399
}

// An FFN block on buffers: gate and up share one int8 quantization of
// the input, SwiGLU joins them, down projects back, and a residual Add
// closes the block. Recorded once, the sequence is replayed per token;
// on a GPU the buffers stay in device memory between the operations.
func ExampleEngine_Record() {
	const hidden, inter = 256, 512
	constant := func(rows, cols int, v float32) *layout.Q4G128 {
		w := make([]float32, rows*cols)
		for i := range w {
			w[i] = v
		}
		m, err := qgemv.Quantize(w, rows, cols, layout.MinMax)
		if err != nil {
			log.Fatal(err)
		}
		return m
	}
	eng, err := qgemv.Open(qgemv.WithBackend("cpu"))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	load := func(m *layout.Q4G128) *qgemv.Matrix {
		mat, err := eng.Load(m)
		if err != nil {
			log.Fatal(err)
		}
		return mat
	}
	gate, up, down := load(constant(inter, hidden, 0.01)), load(constant(inter, hidden, 0.02)), load(constant(hidden, inter, 0.5))
	buf := func(n int, t qgemv.ElemType) *qgemv.Buffer {
		b, err := eng.NewBuffer(n, t)
		if err != nil {
			log.Fatal(err)
		}
		return b
	}
	x, y := buf(hidden, qgemv.Float32), buf(hidden, qgemv.Float32)
	g, u := buf(inter, qgemv.Float32), buf(inter, qgemv.Float32)
	xq, xs := buf(gate.PaddedCols(), qgemv.Int8), buf(gate.PaddedCols()/128, qgemv.Float32)
	seq, err := eng.Record(func() error {
		if err := gate.QuantizeBuffer(xq, xs, x, 1); err != nil {
			return err
		}
		if err := gate.MulInt8Buffer(g, xq, xs, 1); err != nil {
			return err
		}
		if err := up.MulInt8Buffer(u, xq, xs, 1); err != nil {
			return err
		}
		if err := eng.SwiGLU(g, g, u); err != nil {
			return err
		}
		if err := down.MulBuffer(y, g, 1, qgemv.A8); err != nil {
			return err
		}
		return eng.Add(y, y, x)
	})
	if err != nil {
		log.Fatal(err)
	}
	in, out := make([]float32, hidden), make([]float32, hidden)
	for token := 1; token <= 2; token++ {
		for i := range in {
			in[i] = float32(token)
		}
		// x.Write(in), seq.Run() and y.Read(out) in one call (on CUDA,
		// from the second token, one graph with the copies in it)
		if err := seq.RunIO(x, in, y, out); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("token %d: %d operations, y[0] = %.0f\n", token, seq.Len(), out[0])
	}
	// Output:
	// token 1: 6 operations, y[0] = 3116
	// token 2: 6 operations, y[0] = 13344
}
