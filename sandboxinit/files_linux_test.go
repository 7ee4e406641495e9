package sandboxinit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

func TestDirArg(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
		ok   bool
	}{
		{"fds", []string{"/run/cordon/cordon", "internal", "init"}, "", false},
		{"separate", []string{"/run/cordon/cordon", "internal", "init", "--dir", "/run/cordon"}, "/run/cordon", true},
		{"joined", []string{"cordon", "internal", "init", "--dir=/x"}, "/x", true},
		{"flag without value", []string{"cordon", "internal", "init", "--dir"}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := dirArg(c.args)
			if got != c.want || ok != c.ok {
				t.Errorf("dirArg(%q) = %q, %v; want %q, %v", c.args, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestFilesProtocol(t *testing.T) {
	saved := os.Environ()
	t.Cleanup(func() {
		os.Clearenv()
		for _, kv := range saved {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
	})
	dir := filepath.Join(t.TempDir(), "init")
	if err := wire.PrepareDir(dir, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteSpec(dir, wire.Spec{Argv: []string{"true"}, Dir: "/w"}, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	// Without the host's end open, pid1 cannot start: it must not run unwatched.
	if _, _, _, err := openDir(dir); err == nil || !strings.Contains(err.Error(), "is cordon still running") {
		t.Fatalf("openDir without a reader: got %v", err)
	}
	host, err := wire.OpenStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	status, spec, watch, err := openDir(dir) // never dieWithHost here: it would exit the test
	if err != nil {
		t.Fatal(err)
	}
	spec.Close()
	linux.Close(watch)

	files := t.TempDir()
	big := strings.Repeat("x", 100<<10) // more than a pipe holds
	sent, err := wire.Send(dir, wire.Payload{Env: []string{"A=1", "B=x=y", "C=line1\nline2", "BIG=" + big}, FilesDir: files,
		Files: []wire.File{{Name: "token", Value: "s3cret"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sent.Close()
	if err := receive(dir); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("A") != "1" || os.Getenv("B") != "x=y" || os.Getenv("C") != "line1\nline2" || os.Getenv("BIG") != big || os.Getenv("PATH") != "" {
		t.Errorf("environment not replaced: A=%q B=%q C=%q PATH=%q", os.Getenv("A"), os.Getenv("B"), os.Getenv("C"), os.Getenv("PATH"))
	}
	if st, err := os.Stat(filepath.Join(files, "token")); err != nil || st.Mode().Perm() != 0o400 {
		t.Errorf("credential file: %v %v", st, err)
	}
	if data, _ := os.ReadFile(filepath.Join(files, "token")); string(data) != "s3cret" {
		t.Errorf("credential file content: %q", data)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, _ := e.Info(); info.Mode().IsRegular() && e.Name() != wire.DirSpec {
			t.Errorf("%s is a regular file in the init directory; only the spec may be", e.Name())
		}
	}

	if _, err := status.Write([]byte(`{"ok":false,"error":"boom"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	status.Close()
	st, ok := wire.ReadStatus(host)
	if !ok || st.OK || st.Error != "boom" {
		t.Errorf("ReadStatus: got %+v, %v", st, ok)
	}
}

func TestReceiveRefusesPathsInFileNames(t *testing.T) {
	saved := os.Environ()
	t.Cleanup(func() {
		os.Clearenv()
		for _, kv := range saved {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
	})
	for _, name := range []string{"../x", "a/b", "..", ""} {
		dir := filepath.Join(t.TempDir(), "init")
		if err := wire.PrepareDir(dir, os.Geteuid(), os.Getegid()); err != nil {
			t.Fatal(err)
		}
		sent, err := wire.Send(dir, wire.Payload{FilesDir: t.TempDir(), Files: []wire.File{{Name: name, Value: "v"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := receive(dir); err == nil {
			t.Errorf("file name %q accepted", name)
		}
		sent.Close()
	}
}
