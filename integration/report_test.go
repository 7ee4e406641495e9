package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestAuditReportInChromium renders a real run's HTML report in headless Chromium: the
// page loads with no external assets, shows the summary, the command, its diff and the
// denied egress, and the screenshot is not empty.
func TestAuditReportInChromium(t *testing.T) {
	w := newWorld(t)
	chromium, err := exec.LookPath("chromium")
	testutil.Require(t, err == nil, "chromium is needed to look at the report (apt-get install chromium)")
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	mustWrite(t, filepath.Join(w.ws, "main.go"), "package main\n")
	r := w.sh("echo 'func main() {}' >> main.go; curl -s http://evil.example/ -o /dev/null; echo done")
	if r.code != 0 {
		t.Fatal(r)
	}
	report := filepath.Join(t.TempDir(), "report.html")
	if r := w.cordon("", "audit", "report", "-o", report, "last"); r.code != 0 {
		t.Fatalf("audit report: %v", r)
	}
	html, _ := os.ReadFile(report)
	for _, banned := range []string{"<script src", "<link ", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(string(html), "http://evil.example", ""), banned) {
			t.Errorf("the report refers to an external asset (%q)", banned)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	shot := filepath.Join(t.TempDir(), "shot.png")
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + profile}
	if out, err := exec.CommandContext(ctx, chromium, append(flags, "--window-size=1200,1600", "--screenshot="+shot, "file://"+report)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium screenshot: %v\n%s", err, out)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Fatalf("screenshot empty or missing: %v %v", st, err)
	}
	dom, err := exec.CommandContext(ctx, chromium, append(flags, "--dump-dom", "file://"+report)...).Output()
	if err != nil {
		t.Fatalf("chromium dump-dom: %v", err)
	}
	for _, want := range []string{"<h1>cordon run", "intact and sealed", "<h2>Timeline</h2>", "main.go", "+func main() {}", "<h2>Egress</h2>", "DENY", "evil.example"} {
		assertContains(t, "rendered report", string(dom), want)
	}
}
