//go:build opencl

package opencl

import (
	"fmt"

	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// Entropy-coded Bits matrices (layout/ans.Bits) keep their coded words on
// the device; each multiply first decodes them (ans_decode, one
// work-group per unit of Code) into a scratch buffer of the backend, then
// runs the Bits kernels on it, so every activation type and result is the
// plain twin's.

func init() {
	loaders.Register(layout.FormatANSBits, mat.Typed("opencl", func(b *Backend, m *ans.Bits) (Mat, error) {
		return mat.Bind(b.loadANSBits(m))
	}))
}

// loadANSBits copies m's metadata (as a Bits matrix without words) and
// its code to the device.
func (b *Backend) loadANSBits(m *ans.Bits) (*Matrix, error) {
	code, err := b.LoadANS(m.Code)
	if err != nil {
		return nil, err
	}
	h := m.Header
	mx, err := b.load(&h, true)
	if err != nil {
		code.Close()
		return nil, err
	}
	mx.coded, mx.m = code, m // Format and messages name the coded matrix
	return mx, nil
}

// decodeWords decodes the matrix's words into b.ansBitsW and returns it
// (b.mu held).
func (mx *Matrix) decodeWords() (*buffer, error) {
	b, c := mx.b, mx.coded
	if c.isClosed() {
		return nil, ErrClosed
	}
	w, err := b.ensure(&b.ansBitsW, 4*c.units*c.cols/4, false)
	if err != nil {
		return nil, err
	}
	_, _, st, err := b.chainBufs(0, c.units)
	if err != nil {
		return nil, err
	}
	k, _, err := b.srcKernel("ans", ansSource, "ans_decode", 1, 32)
	if err != nil {
		return nil, err
	}
	if err := k.setArgs(mem(c.words), mem(c.offs), mem(c.esc), mem(c.escOffs), mem(c.table), mem(w), mem(st), i32(c.units), i32(c.cols/128)); err != nil {
		return nil, err
	}
	if _, err := b.x.launch(k, 32*c.units, 32, false); err != nil {
		return nil, err
	}
	if err := b.checkStatus(st, c.units, mx.m.Name()); err != nil {
		return nil, fmt.Errorf("opencl: %w", err)
	}
	return w, nil
}
