package creds_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/cordonhq/cordon/creds"

	"github.com/cordonhq/cordon/internal/testutil"
)

func grants() []creds.Grant {
	return []creds.Grant{
		{Name: "ENV_TOKEN", Deliver: "env", Secret: creds.NewSecret("env-value")},
		{Name: "FILE_TOKEN", Deliver: "file", Secret: creds.NewSecret("file-value")},
		{Name: "PROXY_TOKEN", Deliver: "proxy", Secret: creds.NewSecret("proxy-value")},
	}
}

func TestEnv(t *testing.T) {
	if got := creds.Env(grants()); !slices.Equal(got, []string{"ENV_TOKEN=env-value"}) {
		t.Errorf("Env = %q", got)
	}
}

func TestWriteFiles(t *testing.T) {
	testutil.Require(t, runtime.GOOS == "linux", "Linux (the tmpfs check is Linux-only)")
	shm, err := os.MkdirTemp("/dev/shm", "cordon-creds-test-")
	testutil.Require(t, err == nil, "a tmpfs at /dev/shm")
	defer os.RemoveAll(shm)
	if err := creds.WriteFiles(shm, grants()); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(shm)
	if len(entries) != 1 || entries[0].Name() != "FILE_TOKEN" {
		t.Fatalf("wrote %v; want FILE_TOKEN only", entries)
	}
	p := filepath.Join(shm, "FILE_TOKEN")
	st, _ := os.Stat(p)
	data, _ := os.ReadFile(p)
	if st.Mode().Perm() != 0o400 || string(data) != "file-value" {
		t.Errorf("mode %v, content %q", st.Mode(), data)
	}
	// Never over an existing file (O_EXCL: a planted symbolic link counts as one).
	if err := creds.WriteFiles(shm, grants()); err == nil {
		t.Error("overwrote an existing file")
	}

	disk := diskDir(t)
	if err := creds.WriteFiles(disk, grants()); !errors.Is(err, creds.ErrNotTmpfs) {
		t.Errorf("WriteFiles to %s on a disk file system: %v; want ErrNotTmpfs", disk, err)
	}
}
