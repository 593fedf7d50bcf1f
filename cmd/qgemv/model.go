package main

import (
	"bytes"
	"fmt"
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
	if strings.HasSuffix(path, ".gguf") || strings.HasSuffix(path, ".safetensors") {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	n, _ := f.Read(magic[:])
	return n == 4 && string(magic[:]) == "GGUF"
}

func openModel(path string, opt importOpts) (*model, error) {
	head := make([]byte, 4)
	if f, err := os.Open(path); err == nil {
		f.Read(head)
		f.Close()
	}
	if bytes.Equal(head, []byte("GGUF")) {
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
		b, _, err := hfquant.Load(f, p, o)
		if err != nil {
			m.other = append(m.other, fmt.Sprintf("%s (%s): %v", p, k, err))
			continue
		}
		desc := b.Name() + " exact"
		if b.Perm != nil {
			desc += " (act-order permutation)"
		}
		m.tensors = append(m.tensors, modelTensor{name: p, source: strings.ToUpper(string(k)), rows: b.Rows, cols: b.Cols, importsAs: desc,
			load: func() (layout.Matrix, error) { return b, nil }}) // validated and converted once, here
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
	m, _, err := spec.Quantize(w, t.rows, t.cols, layout.BitsOptions{Method: qm, IntegerZero: true})
	if err != nil {
		return nil, "", err
	}
	rel := layout.RelRMSError(m.(interface{ Dequantize() []float32 }).Dequantize(), w)
	return m, fmt.Sprintf("quantized %s, relative RMS error %.5f", m.Name(), rel), nil
}

func inspectModel(path string) error {
	m, err := openModel(path, importOpts{})
	if err != nil {
		return err
	}
	defer m.close()
	st, _ := os.Stat(path)
	fmt.Printf("%s: %s, %d bytes, %d importable matrices\n", path, m.kind, st.Size(), len(m.tensors))
	for _, t := range m.tensors {
		fmt.Printf("  %-48s %-10s %6d x %-6d -> %s\n", t.name, t.source, t.rows, t.cols, t.importsAs)
	}
	if len(m.other) > 0 {
		fmt.Printf("  not imported (%d):\n", len(m.other))
		for _, o := range m.other {
			fmt.Printf("    %s\n", o)
		}
	}
	return nil
}
