# qgemv developer tasks. "make test" is the README's test command and what
# .ci/run calls; it needs only Go (and network access to the module proxy
# the first time).

GO ?= go
PKGS := ./...

.PHONY: all build test bench gen check ci vet fmt-check gen-check fma-check race noasm tags opencl fuzz fixtures cuda-headers cuda-toolkit cuda-vet cuda-test-bin

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
# dispatch's whole suite runs with OpenCL compiled in (selection, overrides
# and the OpenCL conformance suite).
OPENCL_CFLAGS := -O2 -g -DCL_TARGET_OPENCL_VERSION=120
opencl:
	CGO_CFLAGS="$(OPENCL_CFLAGS)" QGEMV_REQUIRE_OPENCL=1 $(GO) test -tags opencl ./opencl/...
	CGO_CFLAGS="$(OPENCL_CFLAGS)" QGEMV_REQUIRE_OPENCL=1 $(GO) test -tags opencl ./dispatch/...

# Every fuzz target for FUZZTIME each. New inputs are not minimized
# (-fuzzminimizetime 0): minimizing one grown from the 8 KiB Q4G128 seed
# held FuzzReadFile at about 30 executions a minute; a failing input is
# still written to testdata/fuzz.
FUZZTIME ?= 30s
FUZZ_TARGETS := FuzzReadFile:./layout FuzzDecode:./layout/ans FuzzSections:./layout/ans FuzzStreams:./layout/ans \
	FuzzParse:./layout/gguf FuzzParse:./layout/safetensors FuzzKernels:./cpu FuzzLowBitKernels:./cpu

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== $${t%%:*} $${t#*:}"; \
		$(GO) test -run XXX -fuzz "^$${t%%:*}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0 $${t#*:}; \
	done

# The whole check: what CI runs.
test: build fmt-check vet gen-check fma-check tags opencl
	$(GO) test $(PKGS)
	$(MAKE) race noasm

check: test

ci: test

# Benchmarks: every format on every backend, with the read-bandwidth
# roofline in the same run.
bench:
	$(GO) test -run XXX -bench . -benchtime 2s -count 3 . | tee bench.txt

# Regenerate the import tests' reference files with llama.cpp's gguf-py and
# the safetensors library (Debian sid packages, unpacked into a cache; needs
# python3 with numpy, e.g. apt-get install python3-numpy python3-yaml
# python3-tqdm python3-requests).
FIXDIR := .cache/fixtures
DEBIAN := http://deb.debian.org/debian/pool/main
fixtures:
	mkdir -p $(FIXDIR)
	cd $(FIXDIR) && test -f gguf.deb || curl -fsSL -o gguf.deb $(DEBIAN)/l/llama.cpp/python3-gguf_0.7.0+dfsg-2_all.deb
	cd $(FIXDIR) && test -f st.deb || curl -fsSL -o st.deb $(DEBIAN)/s/safetensors/python3-safetensors_0.8.0-1_amd64.deb
	cd $(FIXDIR) && dpkg -x gguf.deb root && dpkg -x st.deb root
	cd $(FIXDIR)/root/usr/lib/python3/dist-packages/safetensors && cp -f _safetensors_rust.abi3-*.so _safetensors_rust.abi3.so
	PYTHONPATH=$(FIXDIR)/root/usr/lib/python3/dist-packages /usr/bin/python3 internal/testmodel/reference/make_fixtures.py

# CUDA (build tag cuda). Building needs cuda.h and a libcuda.so link stub:
# cuda-headers extracts just those from Debian's non-free nvidia-cuda-dev
# package into .cache/cuda (downloaded once, about 770 MB). Running needs
# the NVIDIA driver (libcuda.so.1). cuda-toolkit also unpacks Debian's
# nvcc 11.8, which go run ./gen uses to regenerate cuda/ptx from
# cuda/*.cu (PTX ISA 7.8: loadable by drivers from R520 on).
CUDA_DIR := $(CURDIR)/.cache/cuda
CUDA_POOL := http://deb.debian.org/debian/pool/non-free/n/nvidia-cuda-toolkit
CUDA_VER := 11.8.89~11.8.0-5~deb12u1
CUDA_ENV := CGO_CFLAGS="-I$(CUDA_DIR)/include" CGO_LDFLAGS="-L$(CUDA_DIR)/lib"

$(CUDA_DIR)/deb/nvidia-cuda-dev.deb:
	mkdir -p $(CUDA_DIR)/deb
	curl -fsSL -o $@.part "$(CUDA_POOL)/nvidia-cuda-dev_$(CUDA_VER)_amd64.deb" && mv $@.part $@

cuda-headers: $(CUDA_DIR)/include/cuda.h
$(CUDA_DIR)/include/cuda.h: $(CUDA_DIR)/deb/nvidia-cuda-dev.deb
	mkdir -p $(CUDA_DIR)/include $(CUDA_DIR)/lib $(CUDA_DIR)/x
	dpkg-deb --fsys-tarfile $< | tar -x -C $(CUDA_DIR)/x ./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
	cp $(CUDA_DIR)/x/usr/lib/x86_64-linux-gnu/stubs/libcuda.so $(CUDA_DIR)/lib/
	cp $(CUDA_DIR)/x/usr/include/cuda.h $@

cuda-toolkit: $(CUDA_DIR)/toolkit/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile.qgemv
$(CUDA_DIR)/toolkit/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile.qgemv: $(CUDA_DIR)/deb/nvidia-cuda-dev.deb
	cd $(CUDA_DIR)/deb && for p in nvidia-cuda-toolkit libnvvm4; do test -f $$p.deb || curl -fsSL -o $$p.deb "$(CUDA_POOL)/$${p}_$(CUDA_VER)_amd64.deb"; done
	mkdir -p $(CUDA_DIR)/toolkit
	for p in nvidia-cuda-dev nvidia-cuda-toolkit libnvvm4; do dpkg-deb -x $(CUDA_DIR)/deb/$$p.deb $(CUDA_DIR)/toolkit; done
	cd $(CUDA_DIR)/toolkit/usr/lib/nvidia-cuda-toolkit/bin && rm -f nvcc.profile && printf '%s\n' \
		'NVVMIR_LIBRARY_DIR = $$(_HERE_)/../libdevice' \
		'PATH += $$(_HERE_):' \
		'INCLUDES += "-I$$(_HERE_)/../../../include" $$(_SPACE_)' \
		'LIBRARIES =+ $$(_SPACE_)' > nvcc.profile && cp nvcc.profile nvcc.profile.qgemv

# The cuda tag must compile (CI has no GPU): vet type-checks it with cgo.
cuda-vet: cuda-headers
	$(CUDA_ENV) $(GO) vet -tags cuda $(PKGS)

# A test binary for a GPU machine (which has the driver but may lack Go):
# copy .devbin/cuda.test there and run it; QGEMV_CUDA_REPORT=1 prints the
# benchmark table.
cuda-test-bin: cuda-headers
	mkdir -p .devbin
	$(CUDA_ENV) $(GO) test -c -tags cuda -o .devbin/cuda.test ./cuda
