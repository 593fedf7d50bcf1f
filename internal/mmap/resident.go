package mmap

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
)

// Usage is this process's resident memory in bytes, from
// /proc/self/status (Linux): all of it, anonymous, file-backed.
type Usage struct {
	RSS, Anon, File int64
}

// Resident returns the process's resident memory; an error where
// /proc/self/status does not exist or lacks the fields.
func Resident() (Usage, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return Usage{}, err
	}
	defer f.Close()
	var u Usage
	found := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &u.RSS
		case "RssAnon":
			dst = &u.Anon
		case "RssFile":
			dst = &u.File
		default:
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Usage{}, errors.New("mmap: /proc/self/status: " + k + ": " + err.Error())
		}
		*dst = n << 10
		found++
	}
	if err := s.Err(); err != nil {
		return Usage{}, err
	}
	if found < 3 {
		return Usage{}, errors.New("mmap: /proc/self/status lacks VmRSS, RssAnon or RssFile")
	}
	return u, nil
}
