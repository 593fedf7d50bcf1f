package dispatch

import "fmt"

// gpuCandidates lists the GPU backends; neither is compiled into this
// build yet (see the opencl and cuda packages).
func gpuCandidates() []Candidate {
	return []Candidate{
		{Name: "opencl", Detail: "not compiled in (build tag opencl)"},
		{Name: "cuda", Detail: "not compiled in (build tag cuda)"},
	}
}

func openGPU(name string, _ Options) (Backend, error) {
	return nil, fmt.Errorf("dispatch: backend %q is not compiled into this binary (build with -tags %s)", name, name)
}
