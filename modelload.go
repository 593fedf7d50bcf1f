package qgemv

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"

	"github.com/qgemv/qgemv/internal/hugemem"
)

// Weight is a loaded weight matrix of a model: the *Matrix and what the
// file said about it.
type Weight struct {
	Info TensorInfo
	*Matrix
}

// Weights are a model's matrices loaded onto an engine (Model.Load).
type Weights struct {
	list   []*Weight
	failed []TensorInfo
	byName map[string]*Weight
}

// loadTensor imports t, releases its pages of the file and loads it onto e.
func (md *Model) loadTensor(e *Engine, t *modelTensor) (*Matrix, error) {
	var own *hugemem.Block // the import's codes, where e takes them
	m, _, err := md.importTensor(t, false, e.ownedMemory(&own))
	for _, p := range t.parts {
		md.release(p)
	}
	if err != nil {
		if own != nil {
			own.Free()
		}
		return nil, err
	}
	var mat *Matrix
	if own != nil {
		mat, err = e.loadOwned(m, own)
	} else {
		mat, err = e.Load(m)
	}
	if err != nil {
		return nil, md.tensorErr(t.info.Name, err)
	}
	return mat, nil
}

// Load imports the named weight matrices (all of Tensors when names is
// empty) and loads them onto e, in file order, tensor by tensor: each is
// converted from the mapped file, loaded, and its pages of the file are
// released, so the model is never resident twice; at the end the
// conversion's scratch memory goes back to the system
// (debug.FreeOSMemory). Tensors that cannot be imported or loaded are
// listed by Weights.Failed with the reason, not returned as an error;
// the error is for an unknown name, a closed model or engine.
// WithLoadProgress follows it tensor by tensor.
func (md *Model) Load(e *Engine, names ...string) (*Weights, error) {
	if md == nil {
		return nil, ErrInvalid
	}
	md.mu.RLock()
	defer md.mu.RUnlock()
	if md.closed {
		return nil, ErrClosed
	}
	if e == nil {
		return nil, errors.New("qgemv: load model: engine is nil")
	}
	var idx []int
	if len(names) == 0 {
		for i := range md.tensors {
			idx = append(idx, i)
		}
	} else {
		seen := map[int]bool{}
		for _, n := range names {
			i, err := md.find(n)
			if err != nil {
				return nil, err
			}
			if !seen[i] {
				seen[i] = true
				idx = append(idx, i)
			}
		}
		slices.Sort(idx)
	}
	mats := make([]*Matrix, len(idx))
	errs := make([]error, len(idx))
	var next int
	var mu sync.Mutex
	var done, total int64 // progress, in file bytes
	for _, i := range idx {
		total += md.tensors[i].info.Bytes
	}
	var wg sync.WaitGroup
	workers := min(len(idx), runtime.GOMAXPROCS(0), 4)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				k := next
				next++
				mu.Unlock()
				if k >= len(idx) {
					return
				}
				t := &md.tensors[idx[k]]
				mats[k], errs[k] = md.loadTensor(e, t)
				if md.opt.progress != nil {
					mu.Lock()
					done += t.info.Bytes
					md.opt.progress(done, total)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	// Faulting in a tensor's first page maps its cached neighbours too
	// (fault-around), among them pages of tensors already released: drop
	// whatever of the mapping is resident once more.
	for _, m := range md.maps {
		m.Release(m.Data)
	}
	w := &Weights{byName: map[string]*Weight{}}
	for k, i := range idx {
		info := md.tensors[i].info
		if errors.Is(errs[k], ErrClosed) {
			w.Close()
			for _, m := range mats {
				if m != nil {
					m.Close()
				}
			}
			return nil, fmt.Errorf("qgemv: load model %s: %w", md.path, ErrClosed)
		}
		if errs[k] != nil {
			info.Err = errs[k]
			w.failed = append(w.failed, info)
			continue
		}
		wt := &Weight{Info: info, Matrix: mats[k]}
		w.list = append(w.list, wt)
		w.byName[info.Name] = wt
	}
	debug.FreeOSMemory()
	return w, nil
}

// All returns the loaded weights in file order.
func (w *Weights) All() []*Weight {
	if w == nil {
		return nil
	}
	return slices.Clone(w.list)
}

// Failed returns the tensors that were asked for but not loaded, with
// the reason in Err.
func (w *Weights) Failed() []TensorInfo {
	if w == nil {
		return nil
	}
	return slices.Clone(w.failed)
}

// Get returns the loaded weight of that name, or nil.
func (w *Weights) Get(name string) *Weight {
	if w == nil {
		return nil
	}
	return w.byName[name]
}

// StreamBytes returns the bytes one multiply by every loaded weight reads.
func (w *Weights) StreamBytes() int64 {
	if w == nil {
		return 0
	}
	var n int64
	for _, x := range w.list {
		n += x.StreamBytes()
	}
	return n
}

// Close closes every loaded matrix (the first error is returned; matrices
// already closed, or released by their engine's Close, are skipped).
func (w *Weights) Close() error {
	if w == nil {
		return ErrInvalid
	}
	var first error
	for _, x := range w.list {
		if err := x.Close(); err != nil && !errors.Is(err, ErrClosed) && first == nil {
			first = err
		}
	}
	return first
}

// Stage is one step of a decode pass: the weights of one layer that read
// the same input vector (attn_q, attn_k and attn_v; ffn_gate and
// ffn_up), or a single weight.
type Stage struct {
	Layer   int
	Weights []*Weight
}

// Matrices returns the stage's matrices, e.g. for Engine.NewSharedInput.
func (s Stage) Matrices() []*Matrix {
	out := make([]*Matrix, len(s.Weights))
	for i, w := range s.Weights {
		out[i] = w.Matrix
	}
	return out
}

// Stages returns the loaded weights in the order one decode step
// multiplies them: layer by layer (attn_q/k/v, attn_output,
// ffn_gate/up, ffn_down, then the layer's other weights), weights of no
// layer after the last (the LM head, then unknown ones in file order).
// Embedding tables (KindTokenEmbd) are looked up, not multiplied, and
// are left out. Weights of a stage have the same Cols.
func (w *Weights) Stages() []Stage {
	if w == nil {
		return nil
	}
	type item struct {
		w          *Weight
		layer, key int
	}
	var items []item
	for _, x := range w.list {
		if x.Info.Kind == KindTokenEmbd {
			continue
		}
		it := item{w: x, layer: x.Info.Layer, key: 1000}
		if r, ok := kindOrder[x.Info.Kind]; ok {
			it.key = r
		}
		if it.layer < 0 { // after every layer: the LM head, then the rest
			it.layer = 1 << 30
			if x.Info.Kind != KindOutput {
				it.layer++
			}
		}
		items = append(items, it)
	}
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.layer != b.layer {
			return a.layer < b.layer
		}
		return a.key < b.key
	})
	var out []Stage
	for i := 0; i < len(items); {
		j := i + 1
		if items[i].key < 1000 {
			for j < len(items) && items[j].layer == items[i].layer && items[j].key/10 == items[i].key/10 && items[j].w.Cols() == items[i].w.Cols() {
				j++
			}
		}
		st := Stage{Layer: items[i].w.Info.Layer}
		for _, it := range items[i:j] {
			st.Weights = append(st.Weights, it.w)
		}
		out = append(out, st)
		i = j
	}
	return out
}
