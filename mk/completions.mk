# Shell completions, generated from each tool's command tree (lib/cli/completion.go)
# by the tool itself: `TOOL --completion bash|zsh|fish`. Nothing here is written by
# hand per tool, so a new subcommand or flag is in the next build's completions.
#
#   make completions   bash/TOOL, zsh/_TOOL and fish/TOOL.fish under COMPLETIONS_DIR
#
# The host's own binaries (bin/) write them: the scripts do not depend on the
# architecture. `make package` stages them (mk/package.mk) and the packages install
# them where bash-completion, zsh and fish look: docs/install.md.

COMPLETIONS_DIR ?= $(ROOT)/build/completions

.PHONY: completions
completions: build
	rm -rf $(COMPLETIONS_DIR) && mkdir -p $(COMPLETIONS_DIR)/bash $(COMPLETIONS_DIR)/zsh $(COMPLETIONS_DIR)/fish
	@for cmd in $(CMDS); do \
	  $(BIN)/$$cmd --completion bash > $(COMPLETIONS_DIR)/bash/$$cmd; \
	  $(BIN)/$$cmd --completion zsh > $(COMPLETIONS_DIR)/zsh/_$$cmd; \
	  $(BIN)/$$cmd --completion fish > $(COMPLETIONS_DIR)/fish/$$cmd.fish; \
	done
	chmod 0644 $(COMPLETIONS_DIR)/*/*
	@echo "completions: $(COMPLETIONS_DIR)/{bash,zsh,fish}"
