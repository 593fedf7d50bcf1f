package cpu

import (
	"runtime"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// hasAll reports whether the CPU has every named feature. Names are
// cpuid.FeatureID names (e.g. "AVX2", "AVX512VNNI"); cpuid reports the
// AVX and AVX-512 families only when the OS saves their register state.
func hasAll(features []string) bool { return len(missing(features)) == 0 }

// missing returns the features in the list that this CPU lacks.
func missing(features []string) []string {
	var out []string
	for _, f := range features {
		id := cpuid.ParseFeature(f)
		if id == cpuid.UNKNOWN || !cpuid.CPU.Supports(id) {
			out = append(out, f)
		}
	}
	return out
}

// l1PrefetchCPU reports whether the kernels' variants that prefetch the
// next rows into L1 rather than L2 (Bits 4-bit A8, the GGML four-row
// kernels; Q4G128's batch-1 A8 kernel with PREFETCHNTA) run: on AMD Zen 5
// (family 0x1A, 48 KiB of L1D) they measured faster, on Zen 4 (32 KiB)
// slower (the Q4G128 one is not measured there); other CPUs keep L2,
// except the GGML four-row kernels on Intel cores with 48 KiB of L1D
// (ggmlR4L1).
func l1PrefetchCPU() bool { return cpuid.CPU.VendorID == cpuid.AMD && cpuid.CPU.Family >= 0x1a }

// leadFits reports whether a kernel's lead-prefetch variant (the ...PfLead
// kernels: 2 KiB, at most half a row, ahead in each row of a tile) keeps
// at least need bytes in flight over tiles of r rows of rowBytes each;
// below that the next-tile prefetch streams faster. On Zen 5 that is 4
// KiB: Bits2G128
// 14336x4096 (four rows of 1 KB: 2 KiB in flight) took 1.07x (two
// threads) and 1.09x (one) its time with the lead variant. Tiles of fewer
// than four rows never take them: 1-bit tiles, two rows of 1.8 KB on
// 4096x14336, took 1.00x and 1.03x, Bits4G32's two rows of 7 KB 1.22x and
// 1.24x.
func leadFits(r, rowBytes, need int) bool { return r >= 4 && r*leadBytes(rowBytes) >= need }

// leadBytes is how far ahead in each row the lead variants prefetch.
func leadBytes(rowBytes int) int { return min(2048, rowBytes/2) }

// l1Budget returns the working-set budget of the kernels that keep tables
// or activations in L1 (the codebook scalar kernel's and the batched
// Q4G128 kernels' column tiles): the largest power of two at most 2/3 of
// an L1 data cache of l1 bytes, but at least 16 KiB (so 16 KiB when l1 is
// 0: cpuid does not say).
func l1Budget(l1 int) int {
	b := 16 << 10
	for b*2 <= l1*2/3 {
		b *= 2
	}
	return b
}

// Features returns the CPU features this backend cares about, as "NAME+"
// (present) or "NAME-" (absent), space-separated, for reports.
func Features() string {
	var b strings.Builder
	for i, f := range []cpuid.FeatureID{cpuid.AVX, cpuid.AVX2, cpuid.FMA3, cpuid.F16C, cpuid.BMI2,
		cpuid.AVXVNNI, cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL, cpuid.AVX512VBMI, cpuid.AVX512VNNI, cpuid.GFNI, cpuid.AMXINT8} {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.String())
		if cpuid.CPU.Supports(f) {
			b.WriteString("+")
		} else {
			b.WriteString("-")
		}
	}
	return b.String()
}

// Model returns the CPU brand string, core and thread counts. Builds with
// the noasm tag disable cpuid (it honours the tag too); the brand is then
// "unknown" and the counts come from the runtime.
func Model() (brand string, cores, threads int) {
	brand, cores, threads = cpuid.CPU.BrandName, cpuid.CPU.PhysicalCores, cpuid.CPU.LogicalCores
	if brand == "" {
		brand = "unknown (no cpuid)"
	}
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	if cores <= 0 {
		cores = threads
	}
	return brand, cores, threads
}

// L3 returns the last-level cache size in bytes that the CPU reports, or
// 0 when it does not say.
func L3() int64 { return max(0, int64(cpuid.CPU.Cache.L3)) }
