package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// quantiles reads one duration in seconds per line and prints "p50 p99" in ms.
func quantiles(r io.Reader, w io.Writer) error {
	var xs []float64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if f, err := strconv.ParseFloat(sc.Text(), 64); err == nil {
			xs = append(xs, f)
		}
	}
	if len(xs) == 0 {
		return fmt.Errorf("no samples")
	}
	sort.Float64s(xs)
	q := func(p float64) float64 { return xs[int(p*float64(len(xs)-1))] * 1e3 }
	_, err := fmt.Fprintf(w, "%.3f %.3f %d\n", q(0.50), q(0.99), len(xs))
	return err
}
