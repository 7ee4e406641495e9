# cordon: build, test, benchmark. `make test` is what CI runs (.ci/run).
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
BIN := bin/cordon
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/cordonhq/cordon/cli.Version=$(VERSION)

.PHONY: all build man install deps test test-short lint fuzz bench demo clean darwin

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags noengines -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/cordon
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/cordon-engines ./cmd/cordon
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/cordon-init ./cmd/cordon-init
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/cordon-exec ./cmd/cordon-exec

# man: a man page per command in bin/man/man1, made from the same text as --help.
man: build
	rm -rf bin/man/man1
	$(BIN) internal man bin/man/man1

# install: the four binaries side by side in $(DESTDIR)$(PREFIX)/bin (cordon finds
# cordon-engines and cordon-init beside itself; cordon-exec is `cordon exec` alone, for
# harness loops), the man pages in share/man/man1 (cordon-exec.1 is cordon exec's page).
PREFIX ?= /usr/local
install: build man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 bin/cordon bin/cordon-engines bin/cordon-init bin/cordon-exec $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 bin/man/man1/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/

deps:
	@scripts/deps.sh test

# The whole suite: real bwrap sandboxes, attacks included. Under CI=true nothing that
# needs bwrap, root or BPF may skip.
test: deps
	$(GO) vet ./...
	$(GO) vet -tags k8s ./integration/...
	$(MAKE) --no-print-directory darwin
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)
	@GO=$(GO) scripts/k8s-test.sh setup
	@# The integration package's tests run one at a time, and it is the longest
	@# package by far: it is cut in two lanes that run side by side, each a go test
	@# of its own. The second holds the tests on Pods and on the container engines
	@# (TestEscapesOnPods, TestContainer*), which wait on Pods and engines far more
	@# than they compute, and the server's and the session stop's red team
	@# (TestServe*, TestRedServe*, TestRT10*), which balance the two. A
	@# third runs the other packages, two at a time: integration/k8s, named first,
	@# which waits on its cluster most of its nine minutes, beside the rest (as many
	@# minutes of tests, and their builds). -run and -skip name tests of every package
	@# given, so the lanes' go tests are given the integration package alone.
	$(GO) test -race -tags k8s -count=1 -timeout 30m -skip '$(SECOND_LANE)' ./integration/ & first=$$!; \
	$(GO) test -race -tags k8s -count=1 -timeout 30m \
		./integration/k8s/ $$($(GO) list -tags k8s ./... | grep -Ev '/integration(/k8s)?$$') & rest=$$!; \
	$(GO) test -race -tags k8s -count=1 -timeout 30m -run '$(SECOND_LANE)' ./integration/; second=$$?; \
	wait $$first; a=$$?; wait $$rest; b=$$?; [ $$a -eq 0 ] && [ $$b -eq 0 ] && [ $$second -eq 0 ]

SECOND_LANE := ^(TestEscapesOnPods|TestContainer[A-Za-z0-9]*|TestServe[A-Za-z0-9]*|TestRedServe[A-Za-z0-9]*|TestRT10[A-Za-z0-9]*)$$

# darwin: the module vets for macOS on both architectures (the seatbelt backend and
# every _other.go stub; vet compiles what each package imports), and the two binaries
# macOS runs (cordon, cordon-exec) build, cross-compiled here. Linking the module's
# other commands (cordon-init runs only in a Linux sandbox; the bench programs) would
# add a minute to every `make test` and check nothing vet does not.
darwin:
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && for arch in arm64 amd64; do \
		GOOS=darwin GOARCH=$$arch $(GO) vet ./... && \
		GOOS=darwin GOARCH=$$arch $(GO) build -o "$$d" ./cmd/cordon ./cmd/cordon-exec || exit 1; \
	done

test-short:
	$(GO) test -short ./...

lint:
	$(GO) vet ./...
	gofmt -l $$(git ls-files '*.go')
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

fuzz:
	$(GO) test -run XXX -fuzz FuzzParse -fuzztime 60s ./contract
	$(GO) test -run XXX -fuzz FuzzDecodeJSON -fuzztime 60s ./server
	$(GO) test -run XXX -fuzz FuzzUnpack -fuzztime 60s -fuzzminimizetime 5s ./server/workspace

# Benchmarks: Go benchmarks plus side-by-side whole-command timings against the peers
# (bare bwrap, Anthropic's srt, plain true). Figures are ratios from one run.
# ./runner/... includes seatbelt.BenchmarkProfile (profile generation per example contract).
bench: build
	@scripts/deps.sh bench
	$(GO) test -run XXX -bench . -benchtime 2s ./contract ./runner/... ./cli ./internal/uids
	$(GO) test -run XXX -bench . -benchtime 20x ./audit/fsdiff/
	$(GO) test -run XXX -bench Writer ./audit/
	$(GO) test -run XXX -bench PrefixStability -benchtime 1x ./harness/
	scripts/bench.sh
	scripts/bench-egress.sh
	scripts/bench-session.sh
	scripts/bench-phases.sh
	scripts/bench-workspace.sh
	scripts/bench-isolation.sh
	scripts/bench-serve.sh
	scripts/bench-mcp.sh
	scripts/bench-diff.sh $(CURDIR)/$(BIN) bounded "$$(printf 'version: 1\ncommands: {timeout: 10m}')"
	scripts/bench-diff.sh $(CURDIR)/$(BIN) entries-1M "$$(printf 'version: 1\ncommands: {timeout: 10m}\nlimits: {diff: {entries: 1000000}}')"

# The quick-start demo: the built-in default contract against a few attacks.
demo: build deps
	scripts/demo.sh $(BIN)

clean:
	rm -rf bin bench/out

# monitor: the eBPF syscall monitor's generated bindings and benchmarks.
# `make generate` installs clang-14, llvm-14 and libbpf-dev from Debian when missing and
# regenerates monitor/monitor_bpf*.{go,o}; `make check-generated` fails when the committed
# output is stale. `make bench` also runs the monitor's overhead and event-rate benchmarks.
.PHONY: generate check-generated bench-monitor
generate:
	monitor/generate.sh

check-generated:
	monitor/generate.sh --check

bench: bench-monitor
bench-monitor:
	$(GO) test -run XXX -bench 'FindCat|GoBuild' -benchtime 3x ./monitor
	$(GO) test -run XXX -bench EventRate -benchtime 1x ./monitor

# Container backends (docker, containerd): `make test` first makes sure both engines run
# here (Debian's docker.io; containerd, then dockerd on it) and that the busybox test
# image exists in both (scripts/container-env.sh); outside CI a host where that cannot be
# done (not root) skips the container tests. `make bench` compares `cordon run` on each
# engine with the bare engine command (scripts/bench-containers.sh).
.PHONY: container-env bench-containers
container-env:
	@scripts/container-env.sh >/dev/null || [ "$$CI" != true ]

test: container-env

bench: bench-containers
bench-containers: build
	scripts/bench-containers.sh

# Kubernetes (issue 37): `make test` first starts the project's own single-node test
# cluster (scripts/k8s-test.sh setup, through scripts/k8s-env.sh: kube-apiserver and
# kubelet built from the module proxy and cached in /var/cache/cordon-k8s, ~30 minutes
# the first time on a fresh machine; etcd and the CNI plugins from Debian; the kubelet on
# the standard containerd), then tests with -tags k8s, so integration/k8s runs beside
# the other packages. `make k8s-test` runs that package alone; `make k8s-stop` stops the
# cluster.
.PHONY: k8s-env k8s-test k8s-stop
k8s-env:
	@scripts/k8s-env.sh >/dev/null

k8s-test:
	@GO=$(GO) scripts/k8s-test.sh

k8s-stop:
	@scripts/k8s-env.sh stop

# `make bench` also times the kubernetes placement on the test cluster when it exists
# (scripts/bench-k8s.sh: cold start, warm claim, warm exec vs a plain exec stream and a
# local session; skipped when no cluster was ever started here: it builds none).
.PHONY: bench-k8s
bench: bench-k8s
bench-k8s: build
	scripts/bench-k8s.sh
