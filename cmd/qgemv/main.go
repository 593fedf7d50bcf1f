// Command qgemv is the command-line face of the qgemv library.
//
//	qgemv info                      CPU, features, backends, kernels chosen
//	qgemv formats                   the registered formats and their names
//	qgemv bench [flags]             the main job: decode steps of a generated
//	                                LLaMA-3-8B-shaped model, timed; -model FILE:
//	                                of a model file; -workload ffn: a LLaMA FFN
//	                                block; -workload matvans: the MatVANS chain
//	qgemv quantize [flags] IN.f32   raw float32 matrix -> .qgv
//	qgemv inspect FILE              .qgv: header, sections, statistics;
//	                                .gguf/.safetensors: tensors, what each imports as
//	qgemv import [flags] FILE       one tensor of a GGUF/safetensors file -> .qgv
//	qgemv genmodel [flags] -o OUT   a LLaMA-shaped model with random weights
//	qgemv dequantize [flags] FILE   one tensor's values as raw float32
//
// Run "qgemv <command> -h" for each command's flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage: qgemv <command> [flags]

commands:
  info       show the CPU, its features, the backends found and the kernels chosen
  formats    list the registered formats, their spec names and example names
  bench      time decode steps (every weight matrix once, per token) of a generated
             4-layer LLaMA-3-8B-shaped model on the best backend; -model FILE: of a
             model file; -workload ffn: a LLaMA feed-forward block (gate, up, down)
  quantize   quantize a raw little-endian float32 matrix to a .qgv file
  inspect    describe a .qgv, .gguf or .safetensors file
  import     import a tensor of a .gguf or .safetensors file (GGUF K-quants, Q4_x, Q5_x,
             Q8_0, IQ4, GPTQ, AWQ, HQQ exactly; float tensors quantized) into a .qgv file
  genmodel   write a LLaMA-shaped model with random weights (GGUF Q4_K_M/Q4_0/Q8_0, GPTQ)
  dequantize write a tensor of a .gguf file (or a .qgv matrix) as raw little-endian
             float32, row-major
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "info":
		err = cmdInfo(args)
	case "formats":
		err = runFormats(os.Stdout, args)
	case "bench":
		err = cmdBench(args)
	case "quantize":
		err = cmdQuantize(args)
	case "inspect":
		err = cmdInspect(args)
	case "import":
		err = cmdImport(args)
	case "genmodel":
		err = cmdGenModel(args)
	case "dequantize":
		err = cmdDequantize(args)
	case "-h", "-help", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "qgemv: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) { // -h: the flag package printed the usage
		return
	}
	if fe := (flagError{}); errors.As(err, &fe) { // printed with the usage
		os.Exit(2)
	}
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "qgemv: ") { // library errors name the package already
			msg = "qgemv: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}
