package sandboxinit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// channels returns pid1's status writer and spec reader: fds [StatusFD] and [SpecFD],
// or with --dir DIR the files protocol's. It returns nils after saying why on stderr.
func channels() (status, spec *os.File) {
	dir, ok := dirArg(os.Args)
	if !ok {
		return os.NewFile(wire.StatusFD, "status"), os.NewFile(wire.SpecFD, "spec")
	}
	status, spec, watch, err := openDir(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return nil, nil
	}
	go dieWithHost(watch) // before anything can block on the host
	if err := receive(dir); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return nil, nil
	}
	return status, spec
}

// dirArg finds "--dir DIR" or "--dir=DIR" after `internal init`.
func dirArg(args []string) (string, bool) {
	for i, a := range args {
		if a == wire.DirFlag && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, wire.DirFlag+"="); ok {
			return v, true
		}
	}
	return "", false
}

// openDir opens the spec and the status FIFO; watch is a second write end of the FIFO
// for [dieWithHost].
func openDir(dir string) (status, spec *os.File, watch int, err error) {
	fifo := filepath.Join(dir, wire.DirStatus)
	// Non-blocking: with no reader (cordon is gone) the open fails at once with ENXIO.
	fd, err := linux.OpenFIFOWriter(fifo)
	if err != nil {
		return nil, nil, -1, fmt.Errorf("opening the status pipe (is cordon still running?): %w", err)
	}
	watch, err = linux.OpenFIFOWriter(fifo)
	if err != nil {
		linux.Close(fd)
		return nil, nil, -1, fmt.Errorf("opening the status pipe: %w", err)
	}
	spec, err = os.Open(filepath.Join(dir, wire.DirSpec))
	if err != nil {
		linux.Close(fd)
		linux.Close(watch)
		return nil, nil, -1, fmt.Errorf("reading the spec: %w", err)
	}
	return os.NewFile(uintptr(fd), fifo), spec, watch, nil
}

// receive reads the host's [Payload], replaces the environment with its one and
// writes its files.
func receive(dir string) error {
	f, err := os.Open(filepath.Join(dir, wire.DirEnv)) // the host holds the other end open
	if err != nil {
		return fmt.Errorf("opening the environment pipe: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	var p wire.Payload
	if err == nil {
		err = json.Unmarshal(line, &p)
	}
	if err != nil {
		return fmt.Errorf("reading the environment: %w", err)
	}
	os.Clearenv()
	for _, kv := range p.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			os.Setenv(k, v)
		}
	}
	return writeFiles(p.FilesDir, p.Files)
}

// writeFiles creates each of files in dir, mode 0400, refusing a name that is not a
// plain file name or that exists already (O_EXCL: a link planted there is not
// followed either).
func writeFiles(dir string, files []wire.File) error {
	for _, file := range files {
		if file.Name == "" || filepath.Base(file.Name) != file.Name || file.Name == "." || file.Name == ".." {
			return fmt.Errorf("credential file name %q is not a plain name", file.Name)
		}
		w, err := os.OpenFile(filepath.Join(dir, file.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
		if err == nil {
			_, err = io.WriteString(w, file.Value)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("writing credential file %s: %w", file.Name, err)
		}
	}
	return nil
}

// dieWithHost kills everything in the sandbox and exits once the host's end of the
// status FIFO is gone.
func dieWithHost(fd int) {
	if linux.WaitReaderGone(fd) != nil {
		return // cannot watch; the engine still kills the sandbox on timeout and signals
	}
	killSandbox() // exiting then makes the kernel kill whatever is left there
	os.Exit(128 + int(syscall.SIGKILL))
}
