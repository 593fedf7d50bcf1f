# qgemv developer tasks. "make test" is the README's test command and what
# .ci/run calls; it needs only Go (and network access to the module proxy
# the first time).

GO ?= go
PKGS := ./...

.PHONY: all build test bench gen check ci vet fmt-check gen-check race noasm tags opencl fuzz fixtures

all: build

build:
	CGO_ENABLED=0 $(GO) build $(PKGS)

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags noasm $(PKGS)

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Regenerate every generated file (assembly and its Go declarations).
gen:
	$(GO) run ./gen

# Fails if the committed generated files differ from what ./gen writes.
gen-check: gen
	@git diff --exit-code -- asm/ || (echo "generated files are stale: run 'make gen' and commit"; exit 1)
	@test -z "$$(git status --porcelain -- asm/)" || (git status --porcelain -- asm/; echo "untracked generated files: run 'make gen' and commit"; exit 1)

race:
	$(GO) test -race -short $(PKGS)

noasm:
	$(GO) test -tags noasm $(PKGS)

# GPU build tags: the packages must at least compile with them.
tags:
	$(GO) vet -tags opencl $(PKGS)
	$(GO) vet -tags cuda $(PKGS)

# The OpenCL backend's tests (cgo, the ICD loader and a platform such as
# PoCL: .ci/run installs ocl-icd-opencl-dev, opencl-headers and
# pocl-opencl-icd). QGEMV_REQUIRE_OPENCL=1 makes a missing platform a
# failure instead of a skip. The define silences go-opencl's headers. In
# dispatch only the OpenCL tests run here (the rest run in "test", and
# TestUnavailableBackends expects no OpenCL compiled in).
OPENCL_CFLAGS := -O2 -g -DCL_TARGET_OPENCL_VERSION=120
opencl:
	CGO_CFLAGS="$(OPENCL_CFLAGS)" QGEMV_REQUIRE_OPENCL=1 $(GO) test -tags opencl ./opencl/...
	CGO_CFLAGS="$(OPENCL_CFLAGS)" QGEMV_REQUIRE_OPENCL=1 $(GO) test -tags opencl -run 'OpenCL' ./dispatch/...

fuzz:
	$(GO) test -run XXX -fuzz FuzzReadFile -fuzztime 30s ./layout

# The whole check: what CI runs.
test: build fmt-check vet gen-check tags opencl
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
