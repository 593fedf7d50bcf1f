//go:build !amd64 || noasm || purego

package cpu
