package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/internal/sysmem"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

func writeF32(t *testing.T, path string, v []float32) {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestQuantizeInspect(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "w.f32")
	w := make([]float32, 3*200)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)))
	}
	writeF32(t, in, w)
	out := filepath.Join(dir, "w.qgv")
	if err := cmdQuantize([]string{"-rows", "3", "-cols", "200", "-o", out, in}); err != nil {
		t.Fatal(err)
	}
	if err := cmdInspect([]string{out}); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"bits4g64", "bits1row", "sparse12g32"} {
		o := filepath.Join(dir, format+".qgv")
		if err := cmdQuantize([]string{"-format", format, "-rows", "3", "-cols", "200", "-o", o, in}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if err := cmdInspect([]string{o}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
	}
	// Bad inputs are errors.
	for _, args := range [][]string{
		{"-rows", "3", "-cols", "201", "-o", out, in}, // size mismatch
		{"-rows", "0", "-cols", "200", "-o", out, in}, // bad shape
		{"-rows", "3", "-cols", "200", in},            // no -o
		{"-rows", "3", "-cols", "200", "-method", "x", "-o", out, in},
		{"-rows", "3", "-cols", "200", "-format", "q8", "-o", out, in},
		{"-rows", "3", "-cols", "200", "-format", "cb-m1v4b8g128", "-iters", "-5", "-o", out, in},
		{"-rows", "3", "-cols", "200", "-format", "cb-m1v4b8g128", "-time-budget", "-1s", "-o", out, in},
	} {
		if err := cmdQuantize(args); err == nil {
			t.Errorf("quantize %v: no error", args)
		}
	}
	bad := filepath.Join(dir, "bad.qgv")
	raw, _ := os.ReadFile(out)
	os.WriteFile(bad, raw[:len(raw)-1], 0o644)
	if err := cmdInspect([]string{bad}); err == nil || !strings.Contains(err.Error(), "qgv") {
		t.Errorf("inspect of a truncated file: %v", err)
	}
}

// TestSpecTwin: bench -model's native twin of an imported matrix has the
// import's format, codebooks included (they once got a Q4G128 twin).
func TestSpecTwin(t *testing.T) {
	cb, err := codebook.New(64, 256, 2, 8, 6, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := layout.NewBits(64, 256, 3, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []layout.Matrix{cb, b} {
		nat, err := synth.Matrix(m.Spec(), 64, 256, 1)
		if err != nil {
			t.Fatal(err)
		}
		if nat.Name() != m.Name() {
			t.Errorf("the twin of %s is %s", m.Name(), nat.Name())
		}
	}
}

func TestBenchSmall(t *testing.T) {
	for _, format := range []string{"q4g128", "bits2g64", "bits3row", "sparse12g128"} {
		for _, act := range []string{"a8", "a16", "a32"} {
			if err := cmdBench([]string{"-format", format, "-hidden", "256", "-intermediate", "384", "-iters", "3", "-working-set-mib", "0", "-json", "-act", act}); err != nil {
				t.Fatalf("%s %s: %v", format, act, err)
			}
		}
	}
	for _, args := range [][]string{{"-iters", "0"}, {"-act", "a4"}, {"-format", "bits5g64"}, {"-hidden", "0"}, {"extra"}, {"-backend", "nope"}} {
		if err := cmdBench(args); err == nil {
			t.Errorf("bench %v: no error", args)
		}
	}
	// Bad numbers are refused before any work, naming the flag.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-working-set-mib", "9223372036854775807"}, "-working-set-mib 9223372036854775807: want 0 to 65536"},
		{[]string{"-working-set-mib", "-5"}, "-working-set-mib -5"},
		{[]string{"-threads", "-1"}, "-threads -1"},
		{[]string{"-threads", "100000"}, "-threads 100000"},
		{[]string{"-workload", "matvans", "-reps", "0"}, "-reps 0"},
		{[]string{"-workload", "matvans", "-backend", "cpu-bogus"}, `unknown backend "cpu-bogus"`},
	} {
		if err := cmdBench(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bench %v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
	// The working-set variable is read only when it is used.
	t.Setenv("QGEMV_WORKING_SET_MIB", "abc")
	if err := cmdBench([]string{"-format", "q4g128", "-hidden", "256", "-intermediate", "384", "-iters", "1", "-working-set-mib", "0", "-json"}); err != nil {
		t.Errorf("bench -working-set-mib 0 with a bad $QGEMV_WORKING_SET_MIB: %v", err)
	}
	if err := cmdBench([]string{"-hidden", "256", "-intermediate", "384", "-iters", "1", "-json"}); err == nil || !strings.Contains(err.Error(), "QGEMV_WORKING_SET_MIB") {
		t.Errorf("bench with a bad $QGEMV_WORKING_SET_MIB: %v, want an error naming it", err)
	}
	if err := cmdBench([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("bench -h: %v, want flag.ErrHelp (main exits 0 on it)", err)
	}
}

func TestInfo(t *testing.T) {
	t.Setenv(qgemv.EnvBackend, "")
	for _, args := range [][]string{nil, {"-backend", "cpu-generic"}} {
		var out bytes.Buffer
		if err := runInfo(&out, args); err != nil {
			t.Fatalf("info %v: %v", args, err)
		}
		text := out.String()
		want := []string{"cpu:", "features:", "backends:", "chosen:", "cpu-generic", "kernels (A32, A16, A8) on "}
		// Every GPU backend is listed: its devices, or why it is unavailable.
		want = append(want, "  opencl", "  cuda")
		if len(args) > 0 {
			want = append(want, "* cpu-generic", "chosen:    cpu-generic (forced by option)", "on cpu-generic,")
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("info %v: output lacks %q:\n%s", args, w, text)
			}
		}
		for _, name := range infoFormats {
			spec, err := layout.ParseFormatSpec(name)
			if err != nil {
				t.Fatal(err)
			}
			// A kernel (or "not supported") per format; with the CPU
			// forced, a CPU kernel: the CPU implements every format.
			kernel := `\S`
			if len(args) > 0 {
				kernel = `cpu-generic`
			}
			if !regexp.MustCompile(`(?mi)^  ` + regexp.QuoteMeta(spec.String()) + ` +` + kernel).MatchString(text) {
				t.Errorf("info %v: no kernel line (%s) for %s:\n%s", args, kernel, spec, text)
			}
		}
	}
	for _, args := range [][]string{{"extra"}, {"-backend", "nope"}, {"-nosuchflag"}} {
		if err := runInfo(io.Discard, args); err == nil {
			t.Errorf("info %v: no error", args)
		}
	}
}

// TestInfoUnsupportedFormats: formats a backend does not implement are
// listed as such; any other load failure is an error.
func TestInfoUnsupportedFormats(t *testing.T) {
	var out bytes.Buffer
	err := printKernels(&out, "fakegpu", func(m layout.Matrix) (string, error) {
		if _, ok := m.(*codebook.Codebook); ok {
			return "", fmt.Errorf("fakegpu: %s: %w", m.Name(), qgemv.ErrFormatNotImplemented)
		}
		return "fakegpu-kernel", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, w := range []string{"on fakegpu,", "  Q4G128          fakegpu-kernel\n", "  Sparse12G128    fakegpu-kernel\n", "  CB-m1v4b8g128   not supported by fakegpu\n", "  CB-m1v4b12g128  not supported by fakegpu\n"} {
		if !strings.Contains(text, w) {
			t.Errorf("output lacks %q:\n%s", w, text)
		}
	}
	if n := strings.Count(text, "not supported"); n != 3 {
		t.Errorf("%d formats not supported, want the 3 codebooks:\n%s", n, text)
	}
	boom := errors.New("device lost")
	err = printKernels(io.Discard, "fakegpu", func(m layout.Matrix) (string, error) { return "", boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "Q4G128") {
		t.Errorf("load failure: got %v, want an error naming the format and wrapping the cause", err)
	}
}

// TestMatVANSBackend: -workload matvans runs on the engine -backend (or
// $QGEMV_BACKEND) opens, and a backend that does not open fails before
// any matrix is drawn.
func TestMatVANSBackend(t *testing.T) {
	t.Setenv(qgemv.EnvBackend, "")
	for _, args := range [][]string{
		{"-backend", "tpu"},
		{"-backend", "cpu-nosuchset"},
	} {
		err := cmdBench(append([]string{"-workload", "matvans", "-d", "256", "-reps", "1", "-json"}, args...))
		if !errors.Is(err, qgemv.ErrUnknownBackend) {
			t.Errorf("bench -workload matvans %v: %v, want ErrUnknownBackend", args, err)
		}
	}
	if err := cmdBench([]string{"-workload", "matvans", "-backend", "cpu-generic", "-d", "256", "-reps", "1", "-json"}); err != nil {
		t.Errorf("bench -workload matvans -backend cpu-generic: %v", err)
	}
	t.Setenv(qgemv.EnvBackend, "cpu-generic")
	if err := cmdBench([]string{"-workload", "matvans", "-d", "128", "-reps", "1", "-json"}); err != nil {
		t.Errorf("bench -workload matvans with %s=cpu-generic: %v", qgemv.EnvBackend, err)
	}
}

func TestDeviceBWHint(t *testing.T) {
	for backend, want := range map[string]string{"opencl": "-tags opencl", "opencl:1": "./opencl", "cuda": "QGEMV_CUDA_REPORT=1", "cuda:2": "./cuda"} {
		if got := deviceBWHint(backend); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to contain %q", backend, got, want)
		}
	}
}

// TestCLIOutputsAndFlags: an output path that is a directory is refused
// before the work (it failed only at the final rename), an output path
// that is a symbolic link is written through (the rename replaced the
// link), dequantize's -tensor with a .qgv file is an error (it was
// ignored), a GGUF file is recognised by its magic whatever its name,
// and genmodel refuses -group 0 and -shards below 1 (it wrote
// "group_size": 0, or ignored the count).
func TestCLIOutputsAndFlags(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "w.f32")
	w := make([]float32, 2*128)
	for i := range w {
		w[i] = float32(i%9) - 4
	}
	writeF32(t, in, w)
	qgv := filepath.Join(dir, "w.qgv")
	if err := cmdQuantize([]string{"-rows", "2", "-cols", "128", "-o", qgv, in}); err != nil {
		t.Fatal(err)
	}
	if err := cmdDequantize([]string{"-o", dir, qgv}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("dequantize -o DIR: %v", err)
	}
	if err := cmdQuantize([]string{"-rows", "2", "-cols", "128", "-o", dir, in}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("quantize -o DIR: %v", err)
	}
	target, link := filepath.Join(dir, "target.f32"), filepath.Join(dir, "link.f32")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err == nil {
		if err := cmdDequantize([]string{"-o", link, qgv}); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the symbolic link was replaced: %v", err)
		}
		if b, err := os.ReadFile(target); err != nil || len(b) != 4*2*128 {
			t.Errorf("the link's file holds %d bytes (%v), want %d", len(b), err, 4*2*128)
		}
	}
	if err := cmdDequantize([]string{"-tensor", "nosuch", "-o", filepath.Join(dir, "x.f32"), qgv}); err == nil {
		t.Error("dequantize -tensor of a .qgv file accepted")
	}
	gg := filepath.Join(dir, "m.gguf")
	if err := cmdGenModel([]string{"-mix", "q4_0", "-layers", "1", "-hidden", "256", "-ffn", "512", "-kv", "256", "-o", gg}); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "m.bin")
	if err := os.Rename(gg, bin); err != nil {
		t.Fatal(err)
	}
	if err := cmdDequantize([]string{"-tensor", "blk.0.ffn_down.weight", "-o", filepath.Join(dir, "d.f32"), bin}); err != nil {
		t.Errorf("dequantize of a GGUF named .bin: %v", err)
	}
	for _, args := range [][]string{{"-group", "0"}, {"-group", "-2"}, {"-shards", "0"}} {
		a := append([]string{"-mix", "gptq", "-layers", "1", "-hidden", "256", "-ffn", "512", "-kv", "256", "-o", filepath.Join(dir, "g")}, args...)
		if err := cmdGenModel(a); err == nil {
			t.Errorf("genmodel %v accepted", args)
		}
	}
}

// TestBenchFlagsApply: a flag that does not apply to the workload run is
// an error naming it, before any work (it was silently dropped), and a
// refused command leaves no -cpuprofile or -svg file behind.
func TestBenchFlagsApply(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.prof")
	svg := filepath.Join(dir, "chart.svg")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-workload", "ffn", "-svg", svg}, "-svg does not apply to the FFN block"},
		{[]string{"-workload", "ffn", "-mintime", "1s"}, "-mintime does not apply to the FFN block"},
		{[]string{"-workload", "ffn", "-bits", "4"}, "-bits does not apply to the FFN block"},
		{[]string{"-workload", "matvans", "-act", "a16"}, "-act does not apply to the MatVANS chain"},
		{[]string{"-workload", "matvans", "-format", "bits4g128"}, "-format does not apply to the MatVANS chain"},
		{[]string{"-workload", "matvans", "-hugepages=false"}, "-hugepages does not apply to the MatVANS chain"},
		{[]string{"-d", "256"}, "-d does not apply to decode steps of a generated model"},
		{[]string{"-iters", "5", "-mix", "q4_0"}, "-mix does not apply to the FFN block"}, // -iters chose the FFN block
		{[]string{"-twin"}, "-twin does not apply to decode steps of a generated model"},
		{[]string{"-model", "m.gguf", "-mix", "q4_0"}, "-mix does not apply to decode steps of -model"},
		{[]string{"-model", "m.gguf", "-layers", "2"}, "-layers does not apply to decode steps of -model"},
		{[]string{"-model", "m.gguf", "-twin", "-batch", "4"}, "-batch does not apply to -model -twin"},
		{[]string{"-model", "m.gguf", "-twin", "-svg", svg}, "-svg does not apply to -model -twin"},
		{[]string{"-model", "m.gguf", "-twin", "-steps", "3"}, "-steps does not apply to -model -twin"},
		{[]string{"-svg", dir}, "is a directory"},
		{[]string{"-batch", "17"}, "-batch 17"},
	} {
		err := cmdBench(append(c.args, "-cpuprofile", prof, "-quiet"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bench %v: %v, want an error containing %q", c.args, err, c.want)
		}
		for _, p := range []string{prof, svg} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("bench %v: %s was written", c.args, filepath.Base(p))
				os.Remove(p)
			}
		}
	}
	// An FFN block or rotation larger than the machine's memory is an
	// error before the matrices are made (a kernel OOM kill before).
	if tot := sysmem.Total(); tot != 0 && tot < 64<<30 { // else the rotation below fits
		for _, args := range [][]string{
			{"-workload", "ffn", "-hidden", "1048576", "-intermediate", "1048576", "-working-set-mib", "0"},
			{"-workload", "ffn", "-hidden", "256", "-intermediate", "384", "-working-set-mib", "65536"},
		} {
			if err := cmdBench(append(args, "-quiet", "-iters", "1")); err == nil || !strings.Contains(err.Error(), "of memory this process can have") {
				t.Errorf("bench %v: %v, want an error naming the memory", args, err)
			}
		}
	}
	// Flags of every workload still apply where they belong.
	if err := cmdBench([]string{"-workload", "matvans", "-d", "128", "-reps", "1", "-json", "-quiet", "-cpuprofile", prof}); err != nil {
		t.Fatalf("bench -workload matvans: %v", err)
	}
	if st, err := os.Stat(prof); err != nil || st.Size() == 0 {
		t.Errorf("bench -cpuprofile: %v, want a profile", err)
	}
}

// TestFlagErrorsPrintedOnce: an undefined flag is a flagError for every
// command (the flag package prints it with the usage; main does not print
// it a second time), -h is flag.ErrHelp.
func TestFlagErrorsPrintedOnce(t *testing.T) {
	for name, cmd := range map[string]func([]string) error{
		"info": cmdInfo, "formats": func(a []string) error { return runFormats(io.Discard, a) }, "bench": cmdBench, "quantize": cmdQuantize, "inspect": cmdInspect,
		"import": cmdImport, "genmodel": cmdGenModel, "dequantize": cmdDequantize,
	} {
		var fe flagError
		if _, err := capture(t, func() error { return cmd([]string{"-no-such-flag"}) }); !errors.As(err, &fe) {
			t.Errorf("%s -no-such-flag: %v, want a flagError", name, err)
		}
		if _, err := capture(t, func() error { return cmd([]string{"-h"}) }); !errors.Is(err, flag.ErrHelp) || errors.As(err, &fe) {
			t.Errorf("%s -h: %v, want flag.ErrHelp", name, err)
		}
	}
}
