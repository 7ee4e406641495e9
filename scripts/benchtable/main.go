// Command benchtable turns hyperfine's JSON export into the table cordon's notes quote:
// median and mean per command, and each command's ratio to a baseline, all from one run.
//
// Usage: benchtable -baseline NAME results.json
//
//	benchtable -quantiles < seconds.txt
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"text/tabwriter"
)

type result struct {
	Command string    `json:"command"`
	Mean    float64   `json:"mean"`
	Stddev  float64   `json:"stddev"`
	Median  float64   `json:"median"`
	Times   []float64 `json:"times"`
}

func main() {
	baseline := flag.String("baseline", "", "name of the command the ratios are relative to")
	q := flag.Bool("quantiles", false, "read seconds, one per line, from stdin and print p50 p99 (ms) and the count")
	flag.Parse()
	if *q {
		if err := quantiles(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*baseline, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(baseline string, files []string) error {
	if len(files) != 1 {
		return fmt.Errorf("want one hyperfine JSON file")
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return err
	}
	var doc struct {
		Results []result `json:"results"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("decoding %s: %w", files[0], err)
	}
	base := 0.0
	for _, r := range doc.Results {
		if r.Command == baseline {
			base = r.Median
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "command\tmedian ms\tmean ms\tp90 ms\truns\tmedian / %s\t\n", baseline)
	for _, r := range doc.Results {
		ratio := "-"
		if base > 0 {
			ratio = fmt.Sprintf("%.2fx", r.Median/base)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%d\t%s\t\n", r.Command, r.Median*1e3, r.Mean*1e3, pct(r.Times, 0.9)*1e3, len(r.Times), ratio)
	}
	return tw.Flush()
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[int(p*float64(len(s)-1))]
}
