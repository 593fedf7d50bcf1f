//go:build opencl

package opencl

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
	"github.com/qgemv/qgemv/layout/codebook"
)

// rotation returns how many matrices of the given bytes make a working
// set beyond the device's L2: 4x the global memory cache, at least 256
// MiB, as BenchmarkGEMV takes (NVIDIA's OpenCL reports 4 MiB for the
// H200's 60 MiB L2, so the cache size alone is no bound); CPU devices: 2.
func rotation(be *Backend, bytes int64) int {
	if be.Info().Type == "cpu" {
		return 2
	}
	want := max(int64(4*be.Info().CacheBytes), 256<<20)
	return int(max(2, (want+bytes-1)/bytes))
}

// timeEvents sums and releases the events' device seconds.
func timeEvents(b *testing.B, evs []*event) float64 {
	s, err := sumEvents(evs)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkCodebook times the codebook GEMV (Psumbook in local or global
// memory, and the dequantizing baseline) with L2-cold working sets,
// reporting GB/s of StreamBytes plus float32 activations and the ratio
// to the read kernel of the same run.
func BenchmarkCodebook(b *testing.B) {
	be := backend(b)
	rows, cols := 4096, 14336
	if be.Info().Type == "cpu" {
		rows, cols = 512, 2048
	}
	rd := readBandwidth(b, be)
	b.Logf("device %s: read kernel %.1f GB/s", be.Info().Name, rd)
	rng := rand.New(rand.NewSource(1))
	for _, cfg := range []struct {
		m, v, bits, g int
	}{{1, 4, 8, 128}, {2, 8, 8, 128}, {1, 4, 4, 128}} {
		c, err := codebook.New(rows, cols, cfg.m, cfg.v, cfg.bits, cfg.g, false)
		if err != nil {
			b.Fatal(err)
		}
		for i := range c.Words[:len(c.Words)-32] {
			c.Words[i] = rng.Uint32()
		}
		for i := range c.Centroids16 {
			c.Centroids16[i] = layout.ToFP16(float32(rng.NormFloat64()))
		}
		for i := range c.Scales16 {
			c.Scales16[i] = layout.ToFP16(0.01 + 0.1*rng.Float32())
		}
		n := rotation(be, c.StreamBytes())
		for _, mode := range []string{"local", "global", "dequant"} {
			var ms []*Matrix
			for i := 0; i < n; i++ {
				var lm layout.Matrix = c
				if mode == "dequant" {
					lm = codebook.Baseline{Codebook: c}
				}
				mx, err := be.Load(lm)
				if err != nil {
					b.Fatal(err)
				}
				if mode != "dequant" {
					mx.cb.table = mode
				}
				ms = append(ms, mx)
			}
			for _, batch := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/%s/A32/b%d/%dx%d", c.Name(), mode, batch, rows, cols), func(b *testing.B) {
					x := make([]float32, batch*cols)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					y := make([]float32, batch*rows)
					if err := ms[0].MulF32(y, x, batch); err != nil { // uploads the activations
						b.Fatal(err)
					}
					bytes := c.StreamBytes() + int64(4*batch*c.PCols+4*batch*rows)
					be.mu.Lock()
					defer be.mu.Unlock()
					for _, mx := range ms {
						if _, err := mx.launchCB(batch, false); err != nil {
							b.Fatal(err)
						}
					}
					if err := be.x.finish(); err != nil {
						b.Fatal(err)
					}
					b.SetBytes(bytes)
					b.ResetTimer()
					var total float64
					for i := 0; i < b.N; i++ {
						evs, err := ms[i%len(ms)].launchCB(batch, true)
						if err != nil {
							b.Fatal(err)
						}
						if err := be.x.finish(); err != nil {
							b.Fatal(err)
						}
						total += timeEvents(b, evs)
					}
					b.StopTimer()
					reportRate(b, total, bytes, "us/mul", rd, 0)
				})
			}
			for _, mx := range ms {
				mx.Close()
			}
		}
	}
}

// BenchmarkANS times the fused ANS decode + int8 dot product (warp rows
// and warp stripes) and the plain int8 GEMV on d x d matrices, L2 cold,
// reporting GB/s of coded bytes (plain: bytes) and the ratio to the
// read kernel; "eff" is the plain int8 matrix's bytes over the time,
// the rate the decode delivers int8 weights at.
func BenchmarkANS(b *testing.B) {
	be := backend(b)
	d := 4096
	if be.Info().Type == "cpu" {
		d = 512
	}
	rd := readBandwidth(b, be)
	rng := rand.New(rand.NewSource(2))
	w := randInt8(rng, d*d, 4)
	v := randInt8(rng, d, 30)
	for _, l := range []string{"int8", "warp-rows", "warp-stripes"} {
		var mats []ChainMat
		var coded int64 = int64(d * d)
		if l == "int8" {
			for i := 0; i < rotation(be, coded); i++ {
				m, err := be.LoadInt8(w, d, d)
				if err != nil {
					b.Fatal(err)
				}
				mats = append(mats, m)
			}
		} else {
			lay := ans.WarpRows
			if l == "warp-stripes" {
				lay = ans.WarpStripes
			}
			m, err := ans.Encode(w, d, d, lay)
			if err != nil {
				b.Fatal(err)
			}
			coded = m.CodedBytes()
			for i := 0; i < rotation(be, coded); i++ {
				am, err := be.LoadANS(m)
				if err != nil {
					b.Fatal(err)
				}
				mats = append(mats, am)
			}
		}
		b.Run(fmt.Sprintf("%s/%dx%d", l, d, d), func(b *testing.B) {
			y := make([]int32, d)
			if err := mulOne(mats[0], v, y); err != nil {
				b.Fatal(err)
			}
			be.mu.Lock()
			defer be.mu.Unlock()
			vb, yb, sb, err := be.chainBufs(d, d)
			if err != nil {
				b.Fatal(err)
			}
			if err := be.x.write(vb, 0, ptr(v), len(v)); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(coded)
			b.ResetTimer()
			var total float64
			for i := 0; i < b.N; i++ {
				ev, err := mats[i%len(mats)].enqueue(vb, yb, sb, true)
				if err != nil {
					b.Fatal(err)
				}
				if err := be.x.finish(); err != nil {
					b.Fatal(err)
				}
				total += timeEvents(b, []*event{ev})
			}
			b.StopTimer()
			if err := be.checkStatus(sb, mats[0].statusLen(), mats[0].Kernel()); err != nil {
				b.Fatal(err)
			}
			per := total / float64(b.N)
			gbs := float64(coded) / per / 1e9
			b.ReportMetric(per*1e6, "us/mul")
			b.ReportMetric(gbs, "GB/s")
			b.ReportMetric(100*gbs/rd, "%read")
			b.ReportMetric(float64(d*d)/per/1e9, "effGB/s")
			b.ReportMetric(8*float64(coded)/float64(d*d), "bits/w")
		})
		closeChain(mats)
	}
}
