//go:build cuda

package cuda

import "gorgonia.org/cu"

// Multiplies on buffers that read the same input, such as a layer's gate
// and up projections or its q, k and v, prepare that input the same way:
// binary16 activations gathered into the kernel's order (with the Bits
// kernels' block sums), int8 ones reordered for the tensor cores with
// their per-block metadata. Each preparation is one or two small kernels
// on the stream, 2-3 us apiece between the large ones, so the backend
// remembers the last preparation of each kind and the next multiply that
// would repeat it exactly skips it.
//
// A memo is only trusted across buffer multiplies: every other request
// a backend call runs (a write, an elementwise operation, a
// quantization, a host-slice multiply, a capture or a graph launch)
// forgets both, and a multiply whose output overlaps a memo's input
// forgets that one. Keys name everything the scratch contents depend on.

// prepKind numbers the memos.
type prepKind int

const (
	prepF16 prepKind = iota // scratch "x" (and "xsum"): gather_f16/h16, xsum_f16/h16
	prepA8                  // scratch "xq0" and "xm": a8_prep
	nPrep
)

// prepKey is what a preparation's output depends on: its kind, the input
// spans, the kernels' column order (tab: a matrix's table signature),
// the batch and the scratch generation.
type prepKey struct {
	valid     bool
	half      bool // gather_h16 (binary16 input) rather than gather_f16
	in        [2]span
	tab       tabSig
	batch, nv int
	gen       uint64
}

// span is a byte range of device memory.
type span struct {
	p cu.DevicePtr
	n int64
}

func (s span) overlaps(t span) bool {
	return s.n > 0 && t.n > 0 && s.p < t.p+cu.DevicePtr(t.n) && t.p < s.p+cu.DevicePtr(s.n)
}

// tabSig identifies the column order a matrix's kernels read their
// activations in: equal signatures mean equal gather and fragment order
// tables. Matrices with a stored permutation (act order) have none.
type tabSig struct {
	ok          bool
	f           format
	n           int
	mma, a8mma  bool
	cols, pcols int
}

// sig returns the matrix's table signature.
func (mx *Matrix) sig() tabSig {
	if mx.perm != nil {
		return tabSig{}
	}
	s := tabSig{ok: true, f: mx.f, mma: mx.useMMA(), a8mma: mx.useA8MMA(), cols: mx.geo.Cols, pcols: mx.geo.PCols}
	if mx.f == fmtBits {
		s.n = mx.n
	}
	return s
}

// memoHit reports whether the last preparation of kind k was key, and
// records key as the last one otherwise (the caller then prepares). A
// key without a table signature never hits and clears the memo.
func (b *Backend) memoHit(k prepKind, key prepKey) bool {
	key.valid = key.tab.ok
	key.gen = b.scratchGen
	if key.valid && b.memo[k] == key {
		return true
	}
	b.memo[k] = key
	return false
}

// memoForget forgets every preparation (in a backend call; see above).
func (b *Backend) memoForget() { b.memo = [nPrep]prepKey{} }

// memoWrote forgets the preparations whose input overlaps dst, which a
// multiply just wrote (in a backend call).
func (b *Backend) memoWrote(dst span) {
	for k := range b.memo {
		for _, in := range b.memo[k].in {
			if in.overlaps(dst) {
				b.memo[k] = prepKey{}
				break
			}
		}
	}
}
