//go:build !amd64 || noasm || purego

package cpu

// Encoders returns nil: this build has no assembly encoders.
func Encoders() []Encoder { return nil }
