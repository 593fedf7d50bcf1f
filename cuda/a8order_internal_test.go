//go:build cuda

package cuda

import "testing"

// TestA8XR: the int8 tensor-core activations' placement puts every
// (block, vector slot, byte) at its own offset within nv*pc bytes, and
// each 16-byte load of a8mma (lane 4g+t, vector octet n, half h of block
// blk: 512 contiguous bytes per warp) reads bytes 32t+16h .. 32t+16h+15
// of vector 8n+g's block in fragment order. No GPU needed: the device
// tests (TestA8TensorCores, TestConformance) check the kernels against
// it end to end.
func TestA8XR(t *testing.T) {
	for _, nv := range []int{8, 16} {
		const pc = 3 * 128
		seen := make([]bool, nv*pc)
		for blk := range pc / 128 {
			for v := range nv {
				for p := range 128 {
					o := a8XR(blk, v, p, nv)
					if o < 0 || o >= len(seen) || seen[o] {
						t.Fatalf("nv %d: block %d vector %d byte %d at %d: outside %d bytes or taken twice", nv, blk, v, p, o, len(seen))
					}
					seen[o] = true
				}
			}
			for n := range nv / 8 {
				for h := range 2 {
					for lane := range 32 {
						g, tt := lane/4, lane%4
						for b := range 16 {
							want := blk*nv*128 + n*1024 + h*512 + lane*16 + b
							if got := a8XR(blk, 8*n+g, 32*tt+16*h+b, nv); got != want {
								t.Fatalf("nv %d block %d: lane %d, octet %d, half %d, byte %d at %d, the kernel loads %d", nv, blk, lane, n, h, b, got, want)
							}
						}
					}
				}
			}
		}
	}
}
