//go:build !unix

package outpath

import "errors"

func syscallMkfifo(string) error { return errors.New("no named pipes here") }
