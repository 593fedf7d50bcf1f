# qgemv developer tasks. "make test" is the README's test command and what
# .ci/run calls; it needs only Go (and network access to the module proxy
# the first time).

GO ?= go
PKGS := ./...

.PHONY: all build test bench gen check ci vet fmt-check gen-check race noasm tags fuzz

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

fuzz:
	$(GO) test -run XXX -fuzz FuzzReadFile -fuzztime 30s ./layout

# The whole check: what CI runs.
test: build fmt-check vet gen-check tags
	$(GO) test $(PKGS)
	$(MAKE) race noasm

check: test

ci: test

# Benchmarks: every format on every backend, with the read-bandwidth
# roofline in the same run.
bench:
	$(GO) test -run XXX -bench . -benchtime 2s -count 3 . | tee bench.txt
