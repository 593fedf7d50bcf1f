# qgemv developer tasks. "make test" is the README's test command and what
# .ci/run calls: every check. "make check" is the quick loop while editing.
# They need Go, network access to the module proxy the first time, and for
# the cuda tag's checks apt (Debian's cuda.h, through .ci/debcache: once
# per machine, not per clone).

GO ?= go
PKGS := ./...

.PHONY: all build test bench gen check ci vet fmt-check gen-check fma-check race noasm tags opencl go-min fuzz fixtures cuda-headers cuda-env cuda-toolkit cuda-vet cuda-test-bin

all: build

build:
	CGO_ENABLED=0 $(GO) build $(PKGS)
	# other architectures (generic Go there): 32-bit ints, big-endian, arm64
	CGO_ENABLED=0 GOARCH=386 $(GO) build $(PKGS)
	CGO_ENABLED=0 GOARCH=s390x $(GO) build $(PKGS)
	CGO_ENABLED=0 GOARCH=arm64 $(GO) build $(PKGS)

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags noasm $(PKGS)

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Regenerate every generated file: the assembly and its Go declarations,
# and cuda/ptx when a CUDA compiler is found (else gen checks the committed
# PTX against cuda/*.cu).
gen:
	$(GO) run ./gen

# Fails if the committed generated files differ from what ./gen writes.
gen-check: gen
	@git diff --exit-code -- asm/ cuda/ptx/ || (echo "generated files are stale: run 'make gen' and commit"; exit 1)
	@test -z "$$(git status --porcelain -- asm/ cuda/ptx/)" || (git status --porcelain -- asm/ cuda/ptx/; echo "untracked generated files: run 'make gen' and commit"; exit 1)

race:
	$(GO) test -race -short $(PKGS)

noasm:
	$(GO) test -tags noasm $(PKGS)

# layout's quantizers and encoders, and the synthetic matrices, must give
# the same bytes on every architecture, so their Go code must not fuse a
# multiply and an add: Go may fuse x*y + z into one rounding on arm64,
# ppc64le, riscv64, s390x and amd64 with GOAMD64=v3 unless the product is
# converted explicitly (float64(x*y) + z). This compiles those packages for
# each and fails on any fused instruction in their listings (replayed from
# the build cache when unchanged). The kernels in cpu/ may fuse: their
# float results have named error bounds.
FMA_PKGS := ./layout/... ./internal/...
fma-check:
	@set -e; out=""; for a in arm64 ppc64le riscv64 s390x amd64; do \
		s="$$(GOARCH=$$a GOAMD64=v3 $(GO) build -gcflags=-S $(FMA_PKGS) 2>&1)"; \
		echo "$$s" | grep -q STEXT || { echo "fma-check: no listing for $$a"; echo "$$s" | tail -5; exit 1; }; \
		out="$$out$$(echo "$$s" | grep -E '\s(V?FN?M(ADD|SUB)[0-9A-Z]*|WFN?M(ADD|SUB)[A-Z]*)\s' | grep -oE '\([^)]*\.go:[0-9]+\)' | sed "s/^/$$a/" | tr '\n' ' ')"; \
	done; \
	if [ -n "$$out" ]; then echo "fma-check: fused multiply-adds (pin the product: float64(x*y) + z):"; echo "$$out" | tr ' ' '\n' | sort -u; exit 1; fi

# GPU build tags: the packages must at least compile with them.
tags:
	$(GO) vet -tags opencl $(PKGS)
	$(MAKE) cuda-vet

# The OpenCL backend's tests (cgo, the ICD loader and a platform such as
# PoCL: .ci/run installs ocl-icd-opencl-dev, opencl-headers and
# pocl-opencl-icd). QGEMV_REQUIRE_OPENCL=1 makes a missing platform a
# failure instead of a skip. The define silences go-opencl's headers.
# dispatch's suite runs with OpenCL compiled in (selection, overrides and
# the OpenCL conformance suite), except the CPU conformance suite, which
# the tag does not change and the plain run covers. The two packages run
# at once: each spends most of its time in PoCL's compiler, on one core.
OPENCL_CFLAGS := -O2 -g -DCL_TARGET_OPENCL_VERSION=120
opencl:
	CGO_CFLAGS="$(OPENCL_CFLAGS)" QGEMV_REQUIRE_OPENCL=1 $(GO) test -tags opencl -skip '^TestConformanceCPU$$' ./opencl/... ./dispatch/...

# Every fuzz target for FUZZTIME each. New inputs are not minimized
# (-fuzzminimizetime 0): minimizing one grown from the 8 KiB Q4G128 seed
# held FuzzReadFile at about 30 executions a minute; a failing input is
# still written to testdata/fuzz.
FUZZTIME ?= 30s
FUZZ_TARGETS := FuzzReadFile:./layout FuzzDecode:./layout/ans FuzzSections:./layout/ans FuzzStreams:./layout/ans \
	FuzzParse:./layout/gguf FuzzParse:./layout/safetensors FuzzIndex:./layout/safetensors FuzzKernels:./cpu FuzzLowBitKernels:./cpu \
	FuzzOpenModel:. FuzzLoadMul:. FuzzBufferAPI:. FuzzBufferAPIConcurrent:. FuzzQuantize:./layout FuzzEncodeKernels:./layout

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== $${t%%:*} $${t#*:}"; \
		$(GO) test -run XXX -fuzz "^$${t%%:*}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0 $${t#*:}; \
	done

# go.mod's go line is the oldest Go release the module needs (a module
# that imports qgemv is held to at least that): build and vet with exactly
# that release, every build tag included. GOTOOLCHAIN fetches it from the
# module proxy into the module cache (outside the clone), once.
GO_MIN = $(shell awk '$$1 == "go" { v = $$2; if (split(v, p, ".") == 2) v = v ".0"; print "go" v; exit }' go.mod)
go-min:
	GOTOOLCHAIN=$(GO_MIN) $(GO) build $(PKGS)
	GOTOOLCHAIN=$(GO_MIN) $(GO) vet $(PKGS)
	GOTOOLCHAIN=$(GO_MIN) $(GO) vet -tags noasm $(PKGS)
	@$(CUDA_ENV) export CGO_CFLAGS="$$CGO_CFLAGS $(OPENCL_CFLAGS)"; set -x; \
		GOTOOLCHAIN=$(GO_MIN) $(GO) vet -tags opencl,cuda $(PKGS)

# The whole check: what CI runs.
test: build fmt-check vet gen-check fma-check tags go-min opencl
	$(GO) test $(PKGS)
	$(MAKE) race noasm

# The quick loop while editing (about two minutes on 2 cores): gofmt, build
# and vet for this machine, the generated files when their inputs changed
# (regenerated in place: a change fails the check), and the short tests
# (-short) of the packages changed since the merge base with CHECK_BASE or
# in the working tree, and of the packages that import them
# (.ci/changed-pkgs). make test is the whole check.
CHECK_BASE ?= main
check: fmt-check
	$(GO) build $(PKGS)
	$(GO) vet $(PKGS)
	@if [ -n "$$(CHECK_BASE=$(CHECK_BASE) .ci/changed-pkgs -gen)" ]; then \
		before="$$(find asm cuda/ptx -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum)"; \
		(set -x; $(GO) run ./gen) || exit 1; \
		if [ "$$before" != "$$(find asm cuda/ptx -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum)" ]; then \
			echo "check: go run ./gen changed asm/ or cuda/ptx/: review and commit the regenerated files"; exit 1; fi; \
	fi
	@pkgs="$$(CHECK_BASE=$(CHECK_BASE) .ci/changed-pkgs)" || exit 1; \
	if [ -z "$$pkgs" ]; then echo "check: no changed packages to test"; else set -x; $(GO) test -short $$pkgs; fi

ci: test

# Benchmarks: every format on every backend, with the read-bandwidth
# roofline in the same run.
bench:
	$(GO) test -run XXX -bench . -benchtime 2s -count 3 . | tee bench.txt

# Regenerate the import tests' reference files with llama.cpp's gguf-py and
# the safetensors library (Debian unstable's python3-gguf and
# python3-safetensors, unpacked into the user cache by .ci/debcache; needs
# python3 with numpy, e.g. apt-get install python3-numpy python3-yaml
# python3-tqdm python3-requests).
fixtures:
	py="$$(.ci/debcache fixtures)" && PYTHONPATH="$$py" /usr/bin/python3 internal/testmodel/reference/make_fixtures.py

# CUDA (build tag cuda). Building needs cuda.h and a libcuda.so link stub:
# make cuda-headers unpacks just those from Debian's non-free
# nvidia-cuda-dev package (about 770 MB, fetched with apt-get download and
# checked against the archive's signed index) into the user cache
# (${XDG_CACHE_HOME:-~/.cache}/qgemv, by .ci/debcache: once per machine and
# package version, not per clone) and prints the directory. CUDA_DIR=dir
# uses dir/include/cuda.h and dir/lib/libcuda.so instead. Running needs the
# NVIDIA driver (libcuda.so.1). eval "$$(make -s cuda-env)" sets CGO_CFLAGS
# and CGO_LDFLAGS for go build -tags cuda. make cuda-toolkit also unpacks
# Debian's nvcc 11.8 there, which go run ./gen uses to regenerate cuda/ptx
# from cuda/*.cu (PTX ISA 7.8: loadable by drivers from R520 on).
CUDA_DIR ?=
CUDA_ENV = dir="$(CUDA_DIR)"; if [ -z "$$dir" ]; then dir="$$(.ci/debcache cuda-headers)" || exit 1; fi; \
	export CGO_CFLAGS="-I$$dir/include" CGO_LDFLAGS="-L$$dir/lib";

cuda-headers:
	@.ci/debcache cuda-headers

cuda-env:
	@$(CUDA_ENV) echo "export CGO_CFLAGS='$$CGO_CFLAGS' CGO_LDFLAGS='$$CGO_LDFLAGS'"

cuda-toolkit:
	@.ci/debcache cuda-toolkit

# The cuda tag must compile (CI has no GPU): vet type-checks it with cgo.
# The package's tests then run against the link stub as libcuda.so.1: the
# driver reports no device, the GPU tests skip, and the rest (which
# embedded PTX each device gets, the PTX override directory) runs.
cuda-vet:
	@$(CUDA_ENV) set -x; $(GO) vet -tags cuda $(PKGS)
	@$(CUDA_ENV) stub="$$(mktemp -d)" && ln -s "$$dir/lib/libcuda.so" "$$stub/libcuda.so.1" && \
		(set -x; LD_LIBRARY_PATH="$$stub" $(GO) test -tags cuda ./cuda); rc=$$?; rm -rf "$$stub"; exit $$rc

# A test binary for a GPU machine (which has the driver but may lack Go):
# copy .devbin/cuda.test there and run it; QGEMV_CUDA_REPORT=1 prints the
# benchmark table.
cuda-test-bin:
	@$(CUDA_ENV) set -x; mkdir -p .devbin && $(GO) test -c -tags cuda -o .devbin/cuda.test ./cuda
