// Command benchtable turns hyperfine's JSON export into the table cordon's notes quote:
// median and mean per command, and each command's ratio to a baseline, all from one run.
//
// Usage: benchtable -baseline NAME results.json...
//
// Several files are rounds of one benchmark (the same commands, interleaved: each
// round runs every command once): their runs are pooled per command, and the median
// and mean are computed from the pooled times.
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
	User    float64   `json:"user"`   // mean user CPU seconds
	System  float64   `json:"system"` // mean system CPU seconds
	cpu     []float64 // pooled rounds: user+system CPU seconds of each run
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
	if len(files) == 0 {
		return fmt.Errorf("want hyperfine JSON files")
	}
	results, err := merge(files)
	if err != nil {
		return err
	}
	base, baseCPU := 0.0, 0.0
	for _, r := range results {
		if r.Command == baseline {
			base, baseCPU = r.Median, median(r.cpu)
		}
	}
	pooled := len(files) > 1
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := fmt.Sprintf("command\tmedian ms\tmean ms\tp90 ms\truns\tmedian / %s\t", baseline)
	if pooled {
		// CPU time (user+system, children included) is what a loaded machine changes
		// least: the wall-clock ratio is the goal, the CPU ratio says what it would be
		// on an idle machine.
		head += fmt.Sprintf("cpu ms\tcpu / %s\t", baseline)
	}
	fmt.Fprintln(tw, head)
	for _, r := range results {
		line := fmt.Sprintf("%s\t%.2f\t%.2f\t%.2f\t%d\t%s\t", r.Command, r.Median*1e3, r.Mean*1e3,
			pct(r.Times, 0.9)*1e3, len(r.Times), ratio(r.Median, base))
		if pooled {
			line += fmt.Sprintf("%.2f\t%s\t", median(r.cpu)*1e3, ratio(median(r.cpu), baseCPU))
		}
		fmt.Fprintln(tw, line)
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

// merge pools the runs of each command over the hyperfine exports files, keeping the
// commands in their first file's order. One file is returned as hyperfine computed it.
func merge(files []string) ([]result, error) {
	var out []result
	at := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Results []result `json:"results"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", f, err)
		}
		if len(files) == 1 {
			return doc.Results, nil
		}
		for _, r := range doc.Results {
			i, ok := at[r.Command]
			if !ok {
				i, at[r.Command] = len(out), len(out)
				out = append(out, result{Command: r.Command})
			}
			out[i].Times = append(out[i].Times, r.Times...)
			for range r.Times {
				out[i].cpu = append(out[i].cpu, r.User+r.System)
			}
		}
	}
	for i := range out {
		out[i].Median = median(out[i].Times)
		sum := 0.0
		for _, t := range out[i].Times {
			sum += t
		}
		out[i].Mean = sum / float64(max(1, len(out[i].Times)))
	}
	return out, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func ratio(x, base float64) string {
	if base <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x/base)
}
