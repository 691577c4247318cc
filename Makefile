# xroce build targets. Go 1.26; tests need root (network namespaces) and tshark. They
# read the repository's rdma_rxe captures (testdata/), and also the shared ones when
# present (../shared/pcaps, or XROCE_PCAPS).
GO       ?= go
# Fuzz budget per target. A count (N "x") rather than a duration: go1.26's fuzzer
# can fail with "context deadline exceeded" when a -fuzztime duration runs out.
FUZZTIME ?= 50000x
BENCHTIME ?= 1s

.PHONY: build test fuzz fuzz-long bench gobench generate lint clean demo bin/xroce interop interop-quick verbs libverbs

build: bin/xroce
	$(GO) build ./...

# The default build is pure Go: no cgo, no shared library (cmd/xroce's tests assert it).
# -buildvcs=auto stamps the git revision for --version even where GOFLAGS says
# -buildvcs=false.
bin/xroce:
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -o bin/xroce ./cmd/xroce

# bin/xroce-verbs: xroce with the libibverbs provider (--provider verbs; package
# transport/verbs, cgo), for HCAs and rdma_rxe; needs Debian's libibverbs-dev.
verbs:
	@test -e /usr/include/infiniband/verbs.h || { echo "make verbs needs libibverbs-dev: apt-get install -y libibverbs-dev"; exit 1; }
	CGO_ENABLED=1 $(GO) build -buildvcs=auto -tags verbs -o bin/xroce-verbs ./cmd/xroce
	CGO_ENABLED=1 $(GO) vet -tags verbs ./transport/verbs/ ./cmd/xroce/
	CGO_ENABLED=1 $(GO) tool staticcheck -tags verbs ./transport/verbs/ ./cmd/xroce/

# bin/lib/libxroce.so: the verbs library that unmodified libibverbs applications
# preload (xroce run -- APP) to use the devices `xroce daemon` serves; C, built
# with gcc against Debian's libibverbs-dev headers (docs/verbs-library.md).
# LIBXROCE sets the output (tests build it elsewhere).
LIBXROCE ?= bin/lib/libxroce.so
LIBXROCE_CFLAGS ?=
CC       ?= gcc
libverbs:
	@test -e /usr/include/infiniband/verbs.h -a -e /usr/include/rdma/rdma_cma.h || { echo "make libverbs needs gcc, libibverbs-dev and librdmacm-dev: apt-get install -y gcc libibverbs-dev librdmacm-dev"; exit 1; }
	@mkdir -p $(dir $(LIBXROCE))
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
		-Wl,--version-script=cmd/libxroce/libxroce.map -Wl,-soname,libxroce.so -Wl,-z,defs \
		$(LIBXROCE_CFLAGS) -o $(LIBXROCE) cmd/libxroce/libxroce.c cmd/libxroce/rings.c cmd/libxroce/cm.c cmd/libxroce/srq.c cmd/libxroce/segs.c cmd/libxroce/wprotect.c cmd/libxroce/memlock.c cmd/libxroce/cmunsup.c

# Two namespaces, a veth pair, xroce write_bw server and client over AF_XDP with
# data verification; needs root.
demo: bin/xroce
	bash test/scripts/demo.sh

# The project's test command (README.md, .ci/run).
test:
	$(GO) test -count=1 ./...

# Every fuzz target of every package, each for FUZZTIME.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$t ($(FUZZTIME))"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME); \
		done; \
	done

# Every fuzz target for 10^7 executions, or FUZZLONG_SECONDS each, one worker
# (issue 16); the executions each reached are in README ("Fuzzing").
FUZZLONG ?= 10000000
FUZZLONG_SECONDS ?= 600
fuzz-long:
	GO=$(GO) test/scripts/fuzz-long.sh -n $(FUZZLONG) -t $(FUZZLONG_SECONDS) -o bin/fuzz-long.md

# Issue 9's benchmark (test/bench), under 10 minutes, needs root: on a veth pair
# between two namespaces, the raw AF_XDP ceiling, xroce over AF_XDP and over UDP,
# Debian's ib_write_bw and ib_write_lat through the verbs library (issue 17; left
# out, with the reason, without gcc, libibverbs-dev or perftest), TCP, and 1 MiB
# WRITE/READ/SEND through a bridge with 2 % and 5 % random loss (issue 18; left out
# without nftables), each figure the median of three passes (the four WRITE targets' pairs
# three times a pass, each ratio the median of its pairs); the tables and targets on stdout,
# docs/bench.png and the results part of docs/bench.md. PROFILE=1 also keeps every
# xroce process's CPU profile in bin/profiles and writes the top entries behind
# each missed target into docs/bench.md.
bench: bin/xroce
	@if test -e /usr/include/infiniband/verbs.h && command -v $(CC) >/dev/null; then $(MAKE) --no-print-directory libverbs; fi
	$(GO) run ./test/bench -xroce bin/xroce -out docs -go $(GO) $(if $(PROFILE),-profile bin/profiles)

# The Go benchmarks (wire format, engine over the in-memory link, BenchmarkAFXDP),
# with allocation counts.
gobench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

# Regenerates bpf/xroce_bpfel.{go,o} from bpf/xroce.c with bpf2go (a Go tool
# dependency); needs Debian's clang, llvm and libbpf-dev.
generate:
	@command -v clang >/dev/null || { echo "make generate needs clang, llvm and libbpf-dev: apt-get install -y clang llvm libbpf-dev"; exit 1; }
	$(GO) generate ./...

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

# xroce against a real rdma_rxe peer in a QEMU guest built from Debian packages
# (cached under ~/.cache/xroce); needs root and qemu-system-x86. Failed cells keep
# their bridge capture in test/interop/captures/. make interop also runs the
# conformance suite against Debian's perftest servers on rdma_rxe (TestConformRxe:
# rdma_rxe's table in test/interop/captures/conform-rxe.md).
interop-quick:
	XROCE_INTEROP=quick $(GO) test -count=1 -v -timeout 20m -run '^TestMatrix$$' ./test/interop/

interop:
	XROCE_INTEROP=full $(GO) test -count=1 -v -timeout 90m -run '^(TestMatrix|TestConformRxe|TestSlowHostNoRetransmit)$$' ./test/interop/

clean:
	$(GO) clean -testcache
	rm -rf bin
