package ans

import "sort"

func sortWords[T any](s []T, less func(a, b int) bool) { sort.SliceStable(s, less) }
