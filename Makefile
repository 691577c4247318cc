# xroce build targets. Go 1.26; tests need root (network namespaces) and tshark.
GO       ?= go
FUZZTIME ?= 20s
BENCHTIME ?= 1s

.PHONY: build test fuzz bench generate lint clean

build:
	$(GO) build ./...

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

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

generate:
	$(GO) generate ./...

lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

clean:
	$(GO) clean -testcache
	rm -rf bin
