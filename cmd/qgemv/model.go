package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/gguf"
	"github.com/qgemv/qgemv/layout/hfquant"
	"github.com/qgemv/qgemv/layout/safetensors"
)

// modelTensor is one matrix of a model file that qgemv can import.
type modelTensor struct {
	name       string
	source     string // the file's type, e.g. "Q4_K" or "GPTQ"
	rows, cols int
	importsAs  string
	float      bool // imported by quantizing (-format)
	lazy       bool // shape and importsAs known only after load (GPTQ/AWQ/HQQ)
	load       func() (layout.Matrix, error)
	floats     func() ([]float32, error) // float tensors
}

// model is an opened .gguf or .safetensors file.
type model struct {
	kind    string // "gguf" or "safetensors"
	tensors []modelTensor
	other   []string // tensors that cannot be imported, with the reason
	close   func() error
}

// importOpts are the import flags shared by import and bench -model.
type importOpts struct {
	format   string
	method   string
	hq       hfquant.Options
	gptqBits int
}

// isModelFile reports whether path is a GGUF or safetensors file (by its
// magic, or else its extension).
func isModelFile(path string) bool {
	return strings.HasSuffix(path, ".gguf") || strings.HasSuffix(path, ".safetensors") || isGGUF(path)
}

// isGGUF reports whether the file at path starts with the GGUF magic.
func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	return n == 4 && string(magic[:]) == "GGUF"
}

func openModel(path string, opt importOpts) (*model, error) {
	if isGGUF(path) {
		return openGGUF(path)
	}
	return openSafetensors(path, opt)
}

func openGGUF(path string) (*model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m := &model{kind: "gguf", close: f.Close}
	for _, t := range f.Tensors {
		t := t
		rows, cols, err := t.Shape2D()
		as := t.ImportsAs()
		if err != nil || len(t.Dims) < 2 || (!gguf.Lossless(t.Type) && !gguf.Float(t.Type)) {
			m.other = append(m.other, fmt.Sprintf("%s %s %v: %s", t.Name, t.Type, t.Dims, as))
			continue
		}
		mt := modelTensor{name: t.Name, source: t.Type.String(), rows: rows, cols: cols, importsAs: as, float: gguf.Float(t.Type)}
		if mt.float {
			mt.floats = t.Float32s
		} else {
			mt.load = func() (layout.Matrix, error) { return t.Import() }
		}
		m.tensors = append(m.tensors, mt)
	}
	return m, nil
}

func openSafetensors(path string, opt importOpts) (*model, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	m := &model{kind: "safetensors", close: f.Close}
	prefixes, kinds := hfquant.Layers(f)
	part := map[string]bool{}
	for i, p := range prefixes {
		p, k := p, kinds[i]
		for _, suf := range []string{".qweight", ".qzeros", ".scales", ".g_idx", ".W_q", ".scale", ".zero", ".shape", ".nbits", ".group_size", ".axis"} {
			part[p+suf] = true
		}
		o := opt.hq
		o.Kind = k
		// Converted on demand, one layer at a time: a model's layers are
		// not all held in memory at once.
		m.tensors = append(m.tensors, modelTensor{name: p, source: strings.ToUpper(string(k)), lazy: true,
			load: func() (layout.Matrix, error) { b, _, err := hfquant.Load(f, p, o); return b, err }})
	}
	for _, name := range f.Names {
		if part[name] {
			continue
		}
		t := f.Tensors[name]
		switch {
		case len(t.Shape) == 2 && (t.DType == "F32" || t.DType == "F16" || t.DType == "BF16") && layout.CheckDims(t.Shape[0], t.Shape[1]) == nil:
			m.tensors = append(m.tensors, modelTensor{name: name, source: string(t.DType), rows: t.Shape[0], cols: t.Shape[1],
				importsAs: "float32 (quantize to any format)", float: true, floats: t.Float32s})
		default:
			m.other = append(m.other, fmt.Sprintf("%s %s %v: not a float matrix or a recognized quantized layer", name, t.DType, t.Shape))
		}
	}
	return m, nil
}

// find returns the tensor named name.
func (m *model) find(name string) (*modelTensor, error) {
	for i := range m.tensors {
		if m.tensors[i].name == name {
			return &m.tensors[i], nil
		}
	}
	for _, o := range m.other {
		if strings.HasPrefix(o, name+" ") {
			return nil, fmt.Errorf("tensor %s cannot be imported", o)
		}
	}
	return nil, fmt.Errorf("no importable tensor %q (qgemv inspect lists them)", name)
}

// matrix imports t: exactly, or quantized to opt.format for float tensors.
func (t *modelTensor) matrix(opt importOpts) (layout.Matrix, string, error) {
	if !t.float {
		m, err := t.load()
		return m, "exact", err
	}
	spec, err := layout.ParseFormatSpec(opt.format)
	if err != nil {
		return nil, "", err
	}
	qm, err := layout.ParseQuantMethod(opt.method)
	if err != nil {
		return nil, "", err
	}
	w, err := t.floats()
	if err != nil {
		return nil, "", err
	}
	m, _, err := spec.Quantize(w, t.rows, t.cols, layout.QuantOptions{Method: qm, IntegerZero: true})
	if err != nil {
		return nil, "", err
	}
	dq, ok := m.(interface{ Dequantize() []float32 })
	if !ok {
		return nil, "", fmt.Errorf("format %s has no Dequantize to measure the error", m.Name())
	}
	rel := layout.RelRMSError(dq.Dequantize(), w)
	return m, fmt.Sprintf("quantized %s, relative RMS error %.5f", m.Name(), rel), nil
}

// describe fills in the shape and importsAs of a lazy tensor by
// converting it (the result is dropped).
func (t *modelTensor) describe() error {
	if !t.lazy {
		return nil
	}
	mat, err := t.load()
	if err != nil {
		return err
	}
	t.rows, t.cols = mat.Shape()
	t.importsAs = mat.Name() + " exact"
	if p, ok := mat.(layout.Permuted); ok && p.ColumnPerm() != nil {
		t.importsAs += " (act-order permutation)"
	}
	return nil
}

func inspectModel(path string) error {
	m, err := openModel(path, importOpts{})
	if err != nil {
		return err
	}
	defer m.close()
	var lines []string
	for i := range m.tensors {
		t := &m.tensors[i]
		if err := t.describe(); err != nil {
			m.other = append(m.other, fmt.Sprintf("%s (%s): %v", t.name, t.source, err))
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-48s %-10s %6d x %-6d -> %s", t.name, t.source, t.rows, t.cols, t.importsAs))
	}
	st, _ := os.Stat(path)
	fmt.Printf("%s: %s, %d bytes, %d importable matrices\n", path, m.kind, st.Size(), len(lines))
	for _, l := range lines {
		fmt.Println(l)
	}
	if len(m.other) > 0 {
		fmt.Printf("  not imported (%d):\n", len(m.other))
		for _, o := range m.other {
			fmt.Printf("    %s\n", o)
		}
	}
	return nil
}
