//go:build !unix

package mmap

import (
	"errors"
	"os"
)

func mapFile(*os.File, int) ([]byte, error) { return nil, errors.New("mmap: not supported here") }

func unmap([]byte) error { return nil }
