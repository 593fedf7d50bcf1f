module github.com/qgemv/qgemv

go 1.24.0

require (
	github.com/klauspost/cpuid/v2 v2.4.2
	github.com/mmcloughlin/avo v0.6.0
	golang.org/x/sys v0.41.0
	gorgonia.org/cu v0.9.6
)

require (
	github.com/google/uuid v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
)

require (
	github.com/jgillich/go-opencl v0.0.0-20180608191952-a0efba3e5257
	golang.org/x/mod v0.21.0 // indirect
	golang.org/x/sync v0.8.0 // indirect
	golang.org/x/tools v0.25.1 // indirect
)
