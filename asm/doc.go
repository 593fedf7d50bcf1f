// Package asm holds qgemv's generated assembly kernels and their Go
// declarations, nothing else: no logic, no dispatch. Every file here is
// written by "go run ./gen" and must not be edited by hand. Each kernel's
// doc comment states the Go loop it computes, its preconditions and the
// CPU features it requires; package cpu decides when to call it.
package asm
