//go:build cuda

package cuda

import (
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// Entropy-coded Bits matrices (layout/ans.Bits) keep their coded words in
// device memory; each multiply first decodes them (ans_decode, one warp
// per unit of Code) into a scratch buffer of the backend, then runs the
// Bits kernels on it, so every activation type and result is the plain
// twin's.

func init() {
	loaders.Register(layout.FormatANSBits, mat.Typed("cuda", func(b *Backend, m *ans.Bits) (Mat, error) {
		return mat.Bind(b.loadANSBits(m))
	}))
}

// loadANSBits copies m's metadata and its code to the device.
func (b *Backend) loadANSBits(m *ans.Bits) (*Matrix, error) {
	code, err := b.LoadANS(m.Code)
	if err != nil {
		return nil, err
	}
	h := m.Header
	mx, err := b.loadWith(m, &h)
	if err != nil {
		code.Close()
		return nil, err
	}
	mx.coded = code
	return mx, nil
}

// decodeWords decodes the matrix's words into the scratch buffer
// "ansbits" and returns it (in a backend call); a corrupt stream is an error
// wrapping ans.ErrCorrupt.
func (mx *Matrix) decodeWords() (*buffer, error) {
	b, c := mx.b, mx.coded
	if c.isClosed() {
		return nil, ErrClosed
	}
	w, err := b.scratchBuf("ansbits", 4*int64(c.units)*int64(c.cols/4))
	if err != nil {
		return nil, err
	}
	_, _, sb, err := b.chainBufs(0)
	if err != nil {
		return nil, err
	}
	blocks := min((c.units+ansWarps-1)/ansWarps, 8*b.dev.SMs)
	if err := b.launch("ans_decode", blocks, 1, 32*ansWarps, 0, c.words.ptr, c.offs.ptr, c.esc.ptr, c.escOffs.ptr, c.table.ptr,
		w.ptr, sb.ptr, int64(c.units), int64(c.cols/128), int64(0)); err != nil {
		return nil, err
	}
	// checkStatus also waits for the decode, which the multiply needs:
	// the int8 tensor-core kernels load their first words before waiting
	// for the kernel ahead of them (PDL_ENTRY in kernels.cu).
	if err := checkStatus(sb, func(uint32) string { return mx.name }); err != nil {
		return nil, err
	}
	return w, nil
}
