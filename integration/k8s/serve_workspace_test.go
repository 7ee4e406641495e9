//go:build k8s

package k8s

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A placed tenant's workspace is the server's: uploaded through the API, it fills the
// session's Pod; what the Pod's commands change comes back to it, is in the session's
// patch, and is what the workspace's tar holds after the stop, while the upload's own
// files the commands did not touch are as they were.
func TestServeKubernetesWorkspace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	contract := "version: 1\nimage: " + podImage(t) + "\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\"]\nlimits: {memory: 256MiB, pids: 128, cpu: 0.1}\n"
	s := serveCluster(ctx, t, contract, "")

	var up bytes.Buffer
	tw := tar.NewWriter(&up)
	for name, body := range map[string]string{"hello.txt": "from the upload\n", "keep.txt": "untouched\n", "gone.txt": "to remove\n"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	if code, body := s.raw(ctx, t, "PUT", "/v1/workspaces/up", "application/x-tar", up.Bytes()); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("uploading the workspace: %d %s", code, body)
	}
	code, body := s.api(ctx, t, "POST", "/v1/sessions", `{"workspace": "up"}`)
	var sess struct{ ID, Backend string }
	if code != http.StatusCreated || json.Unmarshal(body, &sess) != nil || sess.Backend != "kubernetes" {
		t.Fatalf("a start in the uploaded workspace: %d %s", code, body)
	}
	code, stdout, stderr := cordonIn(ctx, t, s.env, t.TempDir(), "exec", sess.ID, "--", "/bin/sh", "-c",
		"cat hello.txt && echo made in the pod > made.txt && rm gone.txt && echo changed > hello.txt")
	if code != 0 || stdout != "from the upload\n" {
		t.Fatalf("a command in the uploaded workspace: status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, body := s.api(ctx, t, "POST", "/v1/sessions/"+sess.ID+"/stop", ""); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	code, patch := s.raw(ctx, t, "GET", "/v1/sessions/"+sess.ID+"/patch", "", nil)
	for _, want := range []string{"+made in the pod", "-to remove", "-from the upload", "+changed"} {
		if code != http.StatusOK || !strings.Contains(string(patch), want) {
			t.Errorf("the session's patch: %d, want %q in it\n%s", code, want, patch)
		}
	}
	code, back := s.raw(ctx, t, "GET", "/v1/workspaces/up", "", nil)
	if code != http.StatusOK {
		t.Fatalf("the workspace after the stop: %d %s", code, back)
	}
	got := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(back))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(tr)
		got[strings.TrimPrefix(h.Name, "./")] = string(data)
	}
	want := map[string]string{"hello.txt": "changed\n", "keep.txt": "untouched\n", "made.txt": "made in the pod\n"}
	for name, body := range want {
		if got[name] != body {
			t.Errorf("%s in the workspace after the stop: %q, want %q (all: %v)", name, got[name], body, got)
		}
	}
	if _, ok := got["gone.txt"]; ok {
		t.Errorf("gone.txt, removed in the Pod, is still in the workspace")
	}
}

// raw sends one request with a raw body to the server's unix socket as root.
func (s *servedCluster) raw(ctx context.Context, t *testing.T, method, path, ctype string, body []byte) (int, []byte) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.sock)
	}}}
	req, err := http.NewRequestWithContext(ctx, method, "http://cordon"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b
}
