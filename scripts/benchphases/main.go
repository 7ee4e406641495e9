// Command benchphases runs a cordon command N times with a trace file
// (CORDON_TRACE) and prints its phase table: each phase's median and p90 in
// milliseconds, its median start from the spawn, and its share of the median total
// (issue 39: decide from the table, not from guesses).
//
//	benchphases -n 20 -label "cordon run -- true" -- bin/cordon run -- true
//	benchphases -n 20 -trace $f -label "cordon exec" -- bin/cordon exec $sid -- true
//
// With -trace, FILE is the trace a running session's supervisor appends to as well
// (started with CORDON_TRACE=FILE): records are assigned to the iteration whose
// window holds their start, so a supervisor's record written after its client exited
// still counts. Spans nest and overlap (runner.run holds most of the others; the
// early setup runs beside bwrap's start): shares do not add up to 100%.
//
// Commands separated by "---" are run in turn, one of each per iteration (the
// order rotating), each with a trace file of its own, and get a table each: on a
// busy machine, load that comes and goes then weighs on all of them alike.
//
//	benchphases -n 30 -- /tmp/before/cordon run -- true --- bin/cordon run -- true
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"time"
)

// record is one line of a trace file (internal/trace.Record).
type record struct {
	Pid   int    `json:"pid"`
	Prog  string `json:"prog"`
	Name  string `json:"name"`
	Start int64  `json:"start_ns"`
	End   int64  `json:"end_ns"`
}

// iteration is one run of the command: its window and the pid spawned.
type iteration struct {
	t0, t1 int64
	pid    int
}

func main() {
	n := flag.Int("n", 20, "iterations")
	warm := flag.Int("warmup", 2, "iterations run first and not counted")
	label := flag.String("label", "", "the table's title (default: the command)")
	path := flag.String("trace", "", "trace `FILE` to set as CORDON_TRACE and read (default: a temporary file)")
	flag.Parse()
	cmds := split(flag.Args())
	if len(cmds) == 0 || *n < 1 || (len(cmds) > 1 && (*path != "" || *label != "")) {
		fmt.Fprintln(os.Stderr, "usage: benchphases [-n N] [-trace FILE] [-label L] -- CMD [ARGS...]\n       benchphases [-n N] -- CMD [ARGS...] --- CMD [ARGS...] ...")
		os.Exit(2)
	}
	if err := run(*n, *warm, *label, *path, cmds); err != nil {
		fmt.Fprintln(os.Stderr, "benchphases:", err)
		os.Exit(1)
	}
}

// split cuts args at each "---" into commands; an empty one is dropped.
func split(args []string) [][]string {
	var cmds [][]string
	start := 0
	for i := 0; i <= len(args); i++ {
		if i == len(args) || args[i] == "---" {
			if i > start {
				cmds = append(cmds, args[start:i])
			}
			start = i + 1
		}
	}
	return cmds
}

func run(n, warm int, label, path string, cmds [][]string) error {
	paths := make([]string, len(cmds))
	for c := range cmds {
		paths[c] = path
		if path != "" {
			continue
		}
		f, err := os.CreateTemp("", "cordon-phases-*.jsonl")
		if err != nil {
			return err
		}
		f.Close()
		paths[c] = f.Name()
		defer os.Remove(f.Name())
	}
	its := make([][]iteration, len(cmds))
	for i := 0; i < warm+n; i++ {
		for k := range cmds {
			c := (i + k) % len(cmds)
			it, err := once(paths[c], cmds[c])
			if err != nil {
				return err
			}
			if i >= warm {
				its[c] = append(its[c], it)
			}
		}
	}
	for c, argv := range cmds {
		recs, err := read(paths[c])
		if err != nil {
			return err
		}
		l := label
		if l == "" {
			l = fmt.Sprint(argv)
		}
		print(l, its[c], recs)
	}
	return nil
}

// once runs argv with CORDON_TRACE=path, its output discarded.
func once(path string, argv []string) (iteration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "CORDON_TRACE="+path)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return iteration{}, err
	}
	err := cmd.Wait()
	t1 := time.Now()
	if err != nil {
		return iteration{}, fmt.Errorf("%v: %w", argv, err)
	}
	return iteration{t0: t0.UnixNano(), t1: t1.UnixNano(), pid: cmd.Process.Pid}, nil
}

func read(path string) ([]record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}

// phase is one row: its durations and start offsets (ms), one per iteration.
type phase struct {
	name        string
	durs, start []float64
}

// print prints the table. Each iteration's records are those that start in its
// window (up to the next iteration's start); a name seen more than once in an
// iteration (several fsyncs) is summed, its start the first. Two rows are the
// harness's own: spawn→main (fork, exec, the Go runtime, package init) and
// main→exit (after cordon's main returned, until the harness saw it exit).
func print(label string, its []iteration, recs []record) {
	rows := map[string]*phase{}
	add := func(name string, d, s float64) {
		p := rows[name]
		if p == nil {
			p = &phase{name: name}
			rows[name] = p
		}
		p.durs, p.start = append(p.durs, d), append(p.start, s)
	}
	var totals []float64
	for i, it := range its {
		hi := int64(1<<63 - 1)
		if i+1 < len(its) {
			hi = its[i+1].t0
		}
		sum, first := map[string]float64{}, map[string]float64{}
		for _, r := range recs {
			if r.Start < it.t0 || r.Start >= hi || r.Name == "process.start" {
				continue // process.start has a 10 ms resolution: spawn→main says it better
			}
			ms := func(ns int64) float64 { return float64(ns) / 1e6 }
			if _, ok := first[r.Name]; !ok {
				first[r.Name] = ms(r.Start - it.t0)
			}
			sum[r.Name] += ms(r.End - r.Start)
			if r.Pid == it.pid && r.Name == "cordon.main" {
				sum["(spawn→main)"], first["(spawn→main)"] = ms(r.Start-it.t0), 0
				sum["(main→exit)"], first["(main→exit)"] = ms(it.t1-r.End), ms(r.End-it.t0)
			}
		}
		for name, d := range sum {
			add(name, d, first[name])
		}
		totals = append(totals, float64(it.t1-it.t0)/1e6)
	}
	total := quantile(totals, 0.5)
	list := make([]*phase, 0, len(rows))
	for _, p := range rows {
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool {
		si, sj := quantile(list[i].start, 0.5), quantile(list[j].start, 0.5)
		if si != sj {
			return si < sj
		}
		return list[i].name < list[j].name
	})
	fmt.Printf("== phases of %s: %d runs, total median %.1f ms, p90 %.1f ms\n", label, len(its), total, quantile(totals, 0.9))
	fmt.Printf("%-40s %8s %8s %8s %6s %4s\n", "phase", "start", "median", "p90", "share", "runs")
	for _, p := range list {
		med := quantile(p.durs, 0.5)
		fmt.Printf("%-40s %8.2f %8.2f %8.2f %5.1f%% %4d\n", p.name, quantile(p.start, 0.5), med, quantile(p.durs, 0.9), 100*med/total, len(p.durs))
	}
	fmt.Println("(start: median ms from the spawn; spans nest and overlap, so shares do not add up to 100%)")
}

// quantile is the q-quantile of xs (nearest rank), 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}
