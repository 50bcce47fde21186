# Linters, pinned, and scripts/lint-pipes: no pipe into a reader that can exit
# before its writer (SIGPIPE under the recipes' pipefail); scripts/lint-doc-tests:
# every test a document names exists.
STATICCHECK_VERSION := v0.8.2

.PHONY: lint
lint: $(TOOLS_BIN)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	staticcheck ./...
	$(ROOT)/scripts/lint-pipes
	$(ROOT)/scripts/lint-doc-tests

$(TOOLS_BIN)/staticcheck:
	GOBIN=$(TOOLS_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
