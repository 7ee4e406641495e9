package command_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/creds/command"
	"github.com/cordonhq/cordon/internal/hostexec"
)

// TestMintRefusesSandboxWritableCommand: a mint command in a path the policy marks
// untrusted (the workspace, a writable bind) is refused when it is to run, and does
// not run; the same command elsewhere runs in /.
func TestMintRefusesSandboxWritableCommand(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(root, "ran")
	mint := script(t, ws, "mint", "pwd > "+marker+"\necho '{\"token\": \"t\", \"id\": \"i\", \"expires_at\": \"2099-01-01T00:00:00Z\"}'\n")
	sc := map[string]any{"mint": []any{mint}, "revoke": []any{"true"}}
	p := command.New(command.Config{Policy: hostexec.Policy{Untrusted: []string{ws}, Invoker: -1}})
	_, err := p.Issue(context.Background(), args("TOK", time.Minute, sc))
	if !errors.Is(err, hostexec.ErrUntrusted) {
		t.Fatalf("Issue with a mint command in the workspace: %v; want ErrUntrusted", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused mint command ran")
	}
	p = command.New(command.Config{Policy: hostexec.Policy{Invoker: -1}})
	if _, err := p.Issue(context.Background(), args("TOK", time.Minute, sc)); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(marker); string(got) != "/\n" {
		t.Fatalf("the mint command ran in %q; want /", got)
	}
}
