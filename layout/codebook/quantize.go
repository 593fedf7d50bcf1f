package codebook

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/qgemv/qgemv/internal/par"
	"github.com/qgemv/qgemv/layout"
)

// Options tune Quantize. The zero value is usable.
type Options struct {
	FP32       bool          // float32 centroids and scales
	Iters      int           // Lloyd iterations per codebook (0: 10)
	Sample     int           // vectors the centroids are fitted on (0: max(64K, 32*2^B)); all vectors are assigned
	Seed       uint64        // k-means++ seeding and sampling (deterministic)
	TimeBudget time.Duration // stop Lloyd iterations early when exceeded (0: none); assignment always completes
	// Progress, if set, is called with a stage name ("fit codebook 1",
	// "assign codebook 1", ...) and done/total units of that stage.
	Progress func(stage string, done, total int)
}

func (o *Options) progress(stage string, done, total int) {
	if o.Progress != nil {
		o.Progress(stage, done, total)
	}
}

// Quantize quantizes the rows x cols row-major matrix w: per group the
// scale is the RMS of its weights (0 for an all-zero group); the
// normalized vectors are clustered by k-means (k-means++ seeding, Lloyd
// iterations on a sample, then every vector assigned to its nearest
// centroid); with M = 2 the second codebook is fitted to the residual of
// the first (additive/residual quantization).
func Quantize(w []float32, rows, cols int, spec layout.FormatSpec, opt Options) (*Codebook, error) {
	if spec.Format != layout.FormatCodebook {
		return nil, fmt.Errorf("codebook: format %v is not a codebook format", spec.Format)
	}
	if err := layout.CheckDims(rows, cols); err != nil {
		return nil, err
	}
	if len(w) != rows*cols {
		return nil, fmt.Errorf("codebook: %d weights, want %d x %d = %d", len(w), rows, cols, rows*cols)
	}
	for i, v := range w {
		if !finite(v) {
			return nil, fmt.Errorf("codebook: weight (%d, %d) is %v", i/cols, i%cols, v)
		}
	}
	c, err := New(rows, cols, spec.M, spec.V, spec.N, spec.G, opt.FP32)
	if err != nil {
		return nil, err
	}
	if opt.Iters <= 0 {
		opt.Iters = 10
	}
	V, K := c.V, 1<<c.B
	nv := (cols + V - 1) / V // vectors holding true columns (the rest keep code 0)
	// Scales and normalized vectors (true rows and vectors; padding is 0).
	u := make([]float32, rows*nv*V)
	for r := 0; r < rows; r++ {
		for g := 0; g < c.Groups(); g++ {
			c0, c1 := g*c.G, min((g+1)*c.G, cols)
			var ss float64
			for col := c0; col < c1; col++ {
				ss += float64(float64(w[r*cols+col]) * float64(w[r*cols+col]))
			}
			var s float32
			if c1 > c0 && ss > 0 {
				s = float32(math.Sqrt(ss / float64(c1-c0)))
			}
			c.SetScale(r, g, s)
			if s = c.Scale(r, g); !finite(s) || (s == 0 && ss > 0) {
				return nil, fmt.Errorf("codebook: row %d group %d: scale %g is outside the binary16 range (use Options.FP32)", r, g, math.Sqrt(ss/float64(c1-c0)))
			}
			for col := c0; col < c1; col++ {
				if s != 0 {
					u[r*nv*V+col] = w[r*cols+col] / s
				}
			}
		}
	}
	n := rows * nv
	sample := opt.Sample
	if sample <= 0 {
		sample = max(1<<16, 32*K)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x243f6a8885a308d3))
	idx := rng.Perm(n)[:min(sample, n)]
	deadline := time.Time{}
	if opt.TimeBudget > 0 {
		deadline = time.Now().Add(opt.TimeBudget)
	}
	codes := make([][]uint32, c.M)
	target := u // what codebook i is fitted to (the residual for i > 0)
	for i := 0; i < c.M; i++ {
		pts := make([]float32, len(idx)*V)
		for k, p := range idx {
			copy(pts[k*V:(k+1)*V], target[p*V:(p+1)*V])
		}
		cent := kmeans(pts, V, K, opt.Iters, rng, deadline, func(d, t int) { opt.progress(fmt.Sprintf("fit codebook %d", i+1), d, t) })
		for q := 0; q < K; q++ {
			for e := 0; e < V; e++ {
				c.SetCentroid(i, uint32(q), e, cent[q*V+e])
				cent[q*V+e] = c.Centroid(i, uint32(q), e) // assign with the stored values
			}
		}
		codes[i] = assign(target, V, cent, func(d, t int) { opt.progress(fmt.Sprintf("assign codebook %d", i+1), d, t) })
		if i+1 < c.M {
			res := make([]float32, len(target))
			for p := 0; p < n; p++ {
				q := codes[i][p]
				for e := 0; e < V; e++ {
					res[p*V+e] = target[p*V+e] - cent[int(q)*V+e]
				}
			}
			target = res
		}
	}
	if c.M == 2 { // one refinement: re-assign codebook 1 given codebook 2
		rest := make([]float32, len(u))
		cent := make([]float32, K*V)
		for q := 0; q < K; q++ {
			for e := 0; e < V; e++ {
				cent[q*V+e] = c.Centroid(0, uint32(q), e)
			}
		}
		for p := 0; p < n; p++ {
			q := codes[1][p]
			for e := 0; e < V; e++ {
				rest[p*V+e] = u[p*V+e] - c.Centroid(1, q, e)
			}
		}
		codes[0] = assign(rest, V, cent, func(d, t int) { opt.progress("refine codebook 1", d, t) })
	}
	for i := 0; i < c.M; i++ {
		for r := 0; r < rows; r++ {
			for j := 0; j < nv; j++ {
				c.SetCode(r, i, j, codes[i][r*nv+j])
			}
		}
	}
	return c, c.Validate()
}

// kmeans fits k centroids of dimension v to pts: k-means++ seeding, then
// Lloyd iterations (until iters, convergence or the deadline). Empty
// clusters are re-seeded with the point farthest from its centroid.
func kmeans(pts []float32, v, k, iters int, rng *rand.Rand, deadline time.Time, progress func(done, total int)) []float32 {
	n := len(pts) / v
	cent := make([]float32, k*v)
	if n == 0 {
		return cent
	}
	d2 := make([]float64, n)
	dist := func(p []float32, c []float32) float64 {
		var s float64
		for e := range p {
			d := float64(p[e] - c[e])
			s += float64(d * d)
		}
		return s
	}
	first := rng.IntN(n)
	copy(cent[:v], pts[first*v:(first+1)*v])
	var total float64
	for p := 0; p < n; p++ {
		d2[p] = dist(pts[p*v:(p+1)*v], cent[:v])
		total += d2[p]
	}
	for q := 1; q < k; q++ { // k-means++: sample proportionally to d^2
		pick := rng.IntN(n)
		if total > 0 {
			t := rng.Float64() * total
			for p := 0; p < n; p++ {
				if t -= d2[p]; t <= 0 {
					pick = p
					break
				}
			}
		}
		c := cent[q*v : (q+1)*v]
		copy(c, pts[pick*v:(pick+1)*v])
		total = 0
		for p := 0; p < n; p++ {
			if d := dist(pts[p*v:(p+1)*v], c); d < d2[p] {
				d2[p] = d
			}
			total += d2[p]
		}
		if q%64 == 0 {
			progress(q, k+iters*k)
		}
	}
	for it := 0; it < iters; it++ {
		if !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		codes := assign(pts, v, cent, nil)
		sum := make([]float64, k*v)
		cnt := make([]int, k)
		far, farD := 0, -1.0
		changed := false
		for p, q := range codes {
			cnt[q]++
			for e := 0; e < v; e++ {
				sum[int(q)*v+e] += float64(pts[p*v+e])
			}
			if d := dist(pts[p*v:(p+1)*v], cent[int(q)*v:(int(q)+1)*v]); d > farD {
				far, farD = p, d
			}
		}
		for q := 0; q < k; q++ {
			c := cent[q*v : (q+1)*v]
			if cnt[q] == 0 {
				copy(c, pts[far*v:(far+1)*v])
				changed = true
				continue
			}
			for e := 0; e < v; e++ {
				nv := float32(sum[q*v+e] / float64(cnt[q]))
				changed = changed || nv != c[e]
				c[e] = nv
			}
		}
		progress(k+(it+1)*k, k+iters*k)
		if !changed {
			break
		}
	}
	progress(k+iters*k, k+iters*k) // done, also when converged or out of time early
	return cent
}

// nearest returns the centroid q minimizing norm[q] - 2 x.c_q, the first
// of equal ones (the squared distance less |x|^2; NaN never wins, and with
// no finite candidate it is 0). The dot products are summed element by
// element from the first, the same operations for every V; V = 2, 4 and
// 8 are unrolled, which is faster than a loop over elements and gives the
// same codes. The assembly kernels (nearestMany) compute the same
// operations 16 or 8 centroids at a time.
func nearest(x, cent, norm []float32) int {
	best, bestD := 0, float32(math.Inf(1))
	switch len(x) {
	case 2:
		x0, x1 := x[0], x[1]
		cent = cent[:2*len(norm)]
		for q, nq := range norm {
			c := cent[2*q : 2*q+2 : 2*q+2]
			dot := float32(x0 * c[0])
			dot += float32(x1 * c[1])
			if d := nq - 2*dot; d < bestD {
				best, bestD = q, d
			}
		}
	case 4:
		x0, x1, x2, x3 := x[0], x[1], x[2], x[3]
		cent = cent[:4*len(norm)]
		for q, nq := range norm {
			c := cent[4*q : 4*q+4 : 4*q+4]
			dot := float32(x0 * c[0])
			dot += float32(x1 * c[1])
			dot += float32(x2 * c[2])
			dot += float32(x3 * c[3])
			if d := nq - 2*dot; d < bestD {
				best, bestD = q, d
			}
		}
	case 8:
		x0, x1, x2, x3, x4, x5, x6, x7 := x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
		cent = cent[:8*len(norm)]
		for q, nq := range norm {
			c := cent[8*q : 8*q+8 : 8*q+8]
			dot := float32(x0 * c[0])
			dot += float32(x1 * c[1])
			dot += float32(x2 * c[2])
			dot += float32(x3 * c[3])
			dot += float32(x4 * c[4])
			dot += float32(x5 * c[5])
			dot += float32(x6 * c[6])
			dot += float32(x7 * c[7])
			if d := nq - 2*dot; d < bestD {
				best, bestD = q, d
			}
		}
	default:
		v := len(x)
		for q, nq := range norm {
			c := cent[q*v : (q+1)*v]
			dot := float32(x[0] * c[0])
			for e := 1; e < v; e++ {
				dot += float32(x[e] * c[e])
			}
			if d := nq - 2*dot; d < bestD {
				best, bestD = q, d
			}
		}
	}
	return best
}

// assign returns the nearest centroid of every point (ties: the lower
// code), in parallel, with nearestMany where it has a kernel and nearest
// elsewhere (the same codes).
func assign(pts []float32, v int, cent []float32, progress func(done, total int)) []uint32 {
	n, k := len(pts)/v, len(cent)/v
	norm := make([]float32, k)
	ct := make([]float32, k*v) // the centroids transposed, for nearestMany
	for q := 0; q < k; q++ {
		for e := 0; e < v; e++ {
			norm[q] += float32(cent[q*v+e] * cent[q*v+e])
			ct[e*k+q] = cent[q*v+e]
		}
	}
	out := make([]uint32, n)
	const chunk = 4096
	var mu sync.Mutex
	done := 0
	_ = par.Each((n+chunk-1)/chunk, func() func(int) error {
		return func(c int) error {
			p0, p1 := c*chunk, min((c+1)*chunk, n)
			if !nearestMany(pts[p0*v:p1*v], v, ct, norm, out[p0:p1]) {
				for p := p0; p < p1; p++ {
					out[p] = uint32(nearest(pts[p*v:(p+1)*v], cent, norm))
				}
			}
			if progress != nil {
				mu.Lock()
				done += p1 - p0
				progress(done, n)
				mu.Unlock()
			}
			return nil
		}
	})
	return out
}
