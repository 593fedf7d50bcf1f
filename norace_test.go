//go:build !race

package qgemv_test

const raceEnabled = false
