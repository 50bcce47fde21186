# Man pages: man/<name>.<section>.md (go-md2man v2 markdown) rendered to
# man/<name>.<section> (gitignored) and linted with mandoc.
#
#   make man        render every page
#   make man-lint   render, then `mandoc -Tlint` each page: any output fails
#
# MAN_DIR may point elsewhere (a throwaway directory) to try the rules.

GO_MD2MAN_VERSION := v2.0.7
GO_MD2MAN         := $(TOOLS_BIN)/go-md2man
# A stamp per version: bumping GO_MD2MAN_VERSION reinstalls and re-renders.
GO_MD2MAN_STAMP   := $(TOOLS)/stamps/go-md2man-$(GO_MD2MAN_VERSION)

MAN_DIR   ?= man
MAN_SRCS  := $(wildcard $(MAN_DIR)/*.[1-8].md)
MAN_PAGES := $(MAN_SRCS:.md=)

TEST_TARGETS += man-lint

.PHONY: man man-lint mandoc

man: $(MAN_PAGES)

$(MAN_PAGES): %: %.md $(GO_MD2MAN_STAMP)
	$(GO_MD2MAN) -in $< -out $@.tmp && mv -f $@.tmp $@

$(GO_MD2MAN_STAMP):
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/cpuguy83/go-md2man/v2@$(GO_MD2MAN_VERSION)
	@mkdir -p $(@D) && touch $@

mandoc:
	@$(ROOT)/scripts/need-apt mandoc

# mandoc -Tlint exits 0 on some warnings, so its output decides.
man-lint: $(MAN_PAGES) | mandoc
	@fail=0; \
	for page in $(MAN_PAGES); do \
	  out=$$(mandoc -Tlint "$$page" 2>&1) || true; \
	  if [ -n "$$out" ]; then echo "$$out"; fail=1; fi; \
	done; \
	if [ $$fail -ne 0 ]; then echo "man-lint: fix the markdown sources above ($(MAN_DIR)/*.md)"; exit 1; fi; \
	echo "man-lint: $(words $(MAN_PAGES)) page(s) clean"
