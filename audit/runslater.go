package audit

import (
	"fmt"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/contract"
)

// Runs-later files are the changed paths that build or CI tooling runs, or obeys, later
// and outside the sandbox: a CI workflow runs on the next push, a Makefile at the next
// make, a package.json script at the next npm install. An agent that edits one has
// planted code that runs with the host's or CI's privileges, so show and report list
// these files first. Flags are computed when a log is read, never stored, so old logs
// get them too and the hash chain is untouched.

// Category is the kind of tooling that runs a flagged file. The zero value is invalid.
type Category int

// Categories.
const (
	_              Category = iota
	CI                      // a CI system runs it on push: workflows, pipelines
	Build                   // a build tool runs it: make, cmake, gradle, build.rs, docker build
	PackageScripts          // a package manager runs it on install or build: npm scripts, setup.py
	Dependencies            // what gets downloaded and built: manifests' requirements, lockfiles
	Hooks                   // git hooks and files host tools obey: direnv, editors, agent tools
)

func (c Category) String() string {
	switch c {
	case CI:
		return "ci"
	case Build:
		return "build"
	case PackageScripts:
		return "package-scripts"
	case Dependencies:
		return "dependencies"
	case Hooks:
		return "hooks"
	}
	return fmt.Sprintf("Category(%d)", int(c))
}

// MarshalText implements encoding.TextMarshaler: a Category is its String in JSON.
func (c Category) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Flag says why a changed path is a runs-later file.
type Flag struct {
	Category Category
	// Reason says what the file is and what runs it ("GitHub Actions workflow, run by CI
	// on push"); for a rename, whether its new name or its old name is the one flagged.
	Reason string

	// group is the directory whose changes the reader lists as one (such as
	// "web/node_modules/"), or "".
	group string
}

// Changed is what [Classify] is told of one changed path.
type Changed struct {
	Op      fsdiff.Op
	Path    string // slash-separated, relative to the workspace; the new path of a rename
	OldPath string // the old path of a rename
	// Old and New are the whole old and new content, or nil when not known. The missing
	// side of an addition or a deletion counts as empty whatever these hold.
	Old, New []byte
	// Patch is the file's part of a unified diff as fsdiff writes it (from its
	// "diff --git" line), read by the content checks when Old or New is nil.
	Patch string
}

// Classify says whether c is a runs-later file, and why. Most entries of the table
// (see docs/audit.md) flag a path by name alone; a few look at what changed:
// package.json and composer.json are flagged when their scripts or dependencies
// changed, pyproject.toml and Cargo.toml when a section that runs code or names
// dependencies did, and a Go file when a //go:generate line was added. When the content
// cannot be seen (binary, too large, cut from the log), a manifest is flagged anyway;
// a Go file is not. A deleted file counts (a CI check that no longer runs is news), and
// a rename counts for both its old and its new name.
func Classify(c Changed) (Flag, bool) {
	return classify(c.Op, c.Path, c.OldPath, textsOf(c))
}

func classify(op fsdiff.Op, path, oldPath string, t texts) (Flag, bool) {
	if op != fsdiff.Renamed {
		return classifyAt(path, t, "")
	}
	// A rename moves the content: an addition under the new name and a deletion under
	// the old one, whose content the patch does not repeat.
	if f, ok := classifyAt(path, texts{old: emptySide(), new: t.new.added()}, " (the new name)"); ok {
		return f, true
	}
	return classifyAt(oldPath, texts{old: t.old.added(), new: emptySide()}, " (the old name)")
}

func classifyAt(path string, t texts, suffix string) (Flag, bool) {
	r := lookup(path)
	if r == nil {
		return Flag{}, false
	}
	f := Flag{Category: r.cat, Reason: r.what, group: groupOf(path, r.group)}
	if r.check != nil {
		var ok bool
		if f, ok = r.check(t); !ok {
			return Flag{}, false
		}
	}
	f.Reason += suffix
	return f, true
}

// rule is one row of the runs-later table.
type rule struct {
	globs []string // doublestar patterns matched against the workspace-relative path
	cat   Category
	what  string // what the file is and what runs it
	// check, when set, decides from the content (see runslater_check.go); nil means
	// the path alone flags the file.
	check func(texts) (Flag, bool)
	// group, when set, names a directory of installed code (node_modules) whose
	// changed files show as one entry: an npm install in the sandbox changes thousands.
	group string
}

// groupOf returns the outermost directory named name that holds path, with a trailing
// slash, or "" when name is "".
func groupOf(path, name string) string {
	if name == "" {
		return ""
	}
	if strings.HasPrefix(path, name+"/") {
		return name + "/"
	}
	if i := strings.Index(path, "/"+name+"/"); i >= 0 {
		return path[:i+len(name)+2]
	}
	return ""
}

// laterTable is the runs-later table, in the order it is searched: the first rule with
// a matching glob decides. "**/" matches at any depth, so nested projects count. To add
// a file, add a row here and a case to TestClassify; docs/audit.md lists the rows.
var laterTable = []rule{
	// Installed code: run by the next test, build or activation; one entry per directory.
	{globs: []string{"**/node_modules/**"}, cat: Dependencies, group: "node_modules",
		what: "installed npm packages, whose code node runs and whose .bin programs npm scripts run"},
	{globs: []string{"**/.venv/**"}, cat: Dependencies, group: ".venv",
		what: "Python virtual environment, whose programs and packages run once it is activated"},

	// CI: run on push, with the repository's secrets.
	{globs: []string{"**/.github/workflows/**"}, cat: CI, what: "GitHub Actions workflow, run by CI on push"},
	{globs: []string{"**/.github/actions/**"}, cat: CI, what: "GitHub Actions action, run by workflows"},
	{globs: []string{"**/.forgejo/workflows/**", "**/.gitea/workflows/**"}, cat: CI, what: "Forgejo or Gitea Actions workflow, run by CI on push"},
	{globs: []string{"**/.gitlab-ci.yml", "**/.gitlab-ci.yaml", "**/.gitlab/**"}, cat: CI, what: "GitLab CI configuration, run by CI on push"},
	{globs: []string{"**/.circleci/**"}, cat: CI, what: "CircleCI configuration, run by CI on push"},
	{globs: []string{"**/Jenkinsfile", "**/Jenkinsfile.*", "**/*.jenkinsfile"}, cat: CI, what: "Jenkins pipeline, run by CI"},
	{globs: []string{"**/azure-pipelines*.{yml,yaml}", "**/.azure-pipelines/**"}, cat: CI, what: "Azure Pipelines definition, run by CI on push"},
	{globs: []string{"**/.buildkite/**"}, cat: CI, what: "Buildkite pipeline, run by CI on push"},
	{globs: []string{"**/.travis.yml"}, cat: CI, what: "Travis CI configuration, run by CI on push"},
	{globs: []string{"**/bitbucket-pipelines.yml"}, cat: CI, what: "Bitbucket Pipelines definition, run by CI on push"},
	{globs: []string{"**/.drone.yml"}, cat: CI, what: "Drone CI pipeline, run by CI on push"},
	{globs: []string{"**/.woodpecker/**", "**/.woodpecker.{yml,yaml}"}, cat: CI, what: "Woodpecker CI pipeline, run by CI on push"},
	{globs: []string{"**/appveyor.yml", "**/.appveyor.yml", "**/.cirrus.yml", "**/cloudbuild.{yml,yaml}"}, cat: CI, what: "CI configuration (AppVeyor, Cirrus, Cloud Build), run by CI on push"},

	// Build: run by the next build, here or in CI.
	{globs: []string{"**/Makefile", "**/makefile", "**/GNUmakefile", "**/*.mk"}, cat: Build, what: "Makefile, run by make"},
	{globs: []string{"**/CMakeLists.txt", "**/*.cmake"}, cat: Build, what: "CMake script, run by cmake"},
	{globs: []string{"**/meson.build", "**/meson_options.txt", "**/meson.options"}, cat: Build, what: "Meson build file, run by meson"},
	{globs: []string{"**/BUILD", "**/BUILD.bazel", "**/WORKSPACE", "**/WORKSPACE.bazel", "**/MODULE.bazel", "**/*.bzl", "**/.bazelrc"}, cat: Build, what: "Bazel build file, run by bazel"},
	{globs: []string{"**/build.gradle", "**/build.gradle.kts", "**/settings.gradle", "**/settings.gradle.kts", "**/init.gradle", "**/gradlew", "**/gradlew.bat", "**/gradle/wrapper/**"}, cat: Build, what: "Gradle build script or wrapper, run by gradle"},
	{globs: []string{"**/pom.xml", "**/.mvn/**", "**/mvnw", "**/mvnw.cmd"}, cat: Build, what: "Maven build file or wrapper, run by mvn (plugins run code)"},
	{globs: []string{"**/build.rs"}, cat: Build, what: "Cargo build script, run by cargo build"},
	{globs: []string{"**/build.sbt", "**/project/*.sbt", "**/project/*.scala"}, cat: Build, what: "sbt build definition, run by sbt"},
	{globs: []string{"**/Rakefile", "**/rakefile", "**/*.rake"}, cat: Build, what: "Rake tasks, run by rake"},
	{globs: []string{"**/Dockerfile*", "**/*.Dockerfile", "**/*.dockerfile", "**/Containerfile*"}, cat: Build, what: "container build file, run by docker or podman build"},
	{globs: []string{"**/docker-compose*.{yml,yaml}", "**/compose.{yml,yaml}", "**/compose.*.{yml,yaml}"}, cat: Build, what: "Compose file, run by docker compose"},
	{globs: []string{"**/Taskfile.{yml,yaml}", "**/Taskfile.dist.{yml,yaml}", "**/taskfile.{yml,yaml}"}, cat: Build, what: "Taskfile, run by task"},
	{globs: []string{"**/justfile", "**/Justfile", "**/.justfile"}, cat: Build, what: "just recipes, run by just"},
	{globs: []string{"**/magefile.go", "**/magefiles/**"}, cat: Build, what: "Mage targets, run by mage"},
	{globs: []string{"**/*_generate.go"}, cat: Build, what: "Go generate driver, run by go generate"},
	{globs: []string{"**/*.go"}, cat: Build, what: "Go file", check: checkGoGenerate},

	// Package managers: run on install, build or test.
	{globs: []string{"**/package.json"}, cat: PackageScripts, what: "package.json", check: packageJSON.check},
	{globs: []string{"**/composer.json"}, cat: PackageScripts, what: "composer.json", check: composerJSON.check},
	{globs: []string{"**/pyproject.toml"}, cat: PackageScripts, what: "pyproject.toml", check: pyprojectTOML.check},
	{globs: []string{"**/Cargo.toml"}, cat: Build, what: "Cargo.toml", check: cargoTOML.check},
	{globs: []string{"**/setup.py", "**/setup.cfg"}, cat: PackageScripts, what: "setuptools build script or configuration, run by pip install"},
	{globs: []string{"**/tox.ini", "**/noxfile.py"}, cat: PackageScripts, what: "tox or nox session, run by tox or nox"},
	{globs: []string{"**/conftest.py"}, cat: PackageScripts, what: "pytest conftest, run by every pytest"},
	{globs: []string{"**/*.gemspec", "**/Gemfile"}, cat: PackageScripts, what: "gemspec or Gemfile (Ruby code), run by bundler"},
	{globs: []string{"**/.npmrc", "**/.yarnrc", "**/.yarnrc.yml", "**/.pnpmfile.cjs", "**/.yarn/releases/**", "**/.yarn/plugins/**"}, cat: PackageScripts, what: "package manager configuration or plugin, obeyed or run by npm, yarn or pnpm"},

	// Dependencies: what the next install downloads, builds and runs.
	{globs: []string{"**/go.mod", "**/go.sum", "**/go.work", "**/go.work.sum"}, cat: Dependencies, what: "Go module requirements (and toolchain), fetched by go"},
	{globs: []string{"**/package-lock.json", "**/npm-shrinkwrap.json", "**/yarn.lock", "**/pnpm-lock.yaml", "**/pnpm-workspace.yaml", "**/bun.lock", "**/bun.lockb"}, cat: Dependencies, what: "JavaScript lockfile, installed by npm, yarn, pnpm or bun"},
	{globs: []string{"**/Cargo.lock"}, cat: Dependencies, what: "Cargo lockfile, fetched by cargo"},
	{globs: []string{"**/Gemfile.lock"}, cat: Dependencies, what: "Bundler lockfile, installed by bundler"},
	{globs: []string{"**/composer.lock"}, cat: Dependencies, what: "Composer lockfile, installed by composer"},
	{globs: []string{"**/poetry.lock", "**/Pipfile", "**/Pipfile.lock", "**/uv.lock", "**/pdm.lock", "**/requirements*.txt", "**/constraints*.txt"}, cat: Dependencies, what: "Python requirements or lockfile, installed by pip, poetry, pipenv or uv"},

	// Hooks: git hooks and what host tools run or obey (the contract keeps most of these
	// read-only: contract.HostExecuted, appended below with a generic reason).
	{globs: []string{"**/.pre-commit-config.yaml", "**/.pre-commit-hooks.yaml"}, cat: Hooks, what: "pre-commit hook configuration, run by git commit"},
	{globs: []string{"**/.husky", "**/.husky/**"}, cat: Hooks, what: "husky git hook, run by git"},
	{globs: []string{"**/lefthook.{yml,yaml}", "**/.lefthook.{yml,yaml}", "**/lefthook-local.{yml,yaml}"}, cat: Hooks, what: "lefthook git hook configuration, run by git"},
	{globs: []string{"**/.githooks/**"}, cat: Hooks, what: "git hooks directory, run by git (core.hooksPath)"},
	{globs: []string{"**/.envrc", "**/.direnv/**"}, cat: Hooks, what: "direnv environment, run by the shell on cd"},
	{globs: []string{"**/.vscode", "**/.vscode/**"}, cat: Hooks, what: "VS Code workspace configuration (tasks, settings), obeyed by the editor"},
}

// lookup returns the first rule matching path, or nil.
func lookup(path string) *rule {
	rules := laterRules()
	for i := range rules {
		for _, g := range rules[i].globs {
			if ok, _ := doublestar.Match(g, path); ok {
				return &rules[i]
			}
		}
	}
	return nil
}

// laterRules is laterTable followed by one rule for each entry of contract.HostExecuted,
// at any depth (the contract protects them at the workspace root only, and a diff may
// show one anyway, from a widen entry or outside a command).
var laterRules = sync.OnceValue(func() []rule {
	rules := append([]rule(nil), laterTable...)
	for _, e := range contract.HostExecuted {
		name := strings.TrimSuffix(e, "/")
		globs := []string{"**/" + name}
		if name != e {
			globs = append(globs, "**/"+name+"/**")
		}
		rules = append(rules, rule{globs: globs, cat: Hooks,
			what: "file host tools run or obey (contract host-executed list)"})
	}
	return rules
})
