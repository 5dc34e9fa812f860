# t/fuzz/fuzz.mk - builds the libFuzzer targets (t/fuzz/fuzz_*.c) with clang.
#
# GNU make, run by the `fuzz`, `fuzz-smoke` and `fuzz-build` targets of the
# project's Makefile (Makefile.am), which passes the source lists and the
# configured library flags, so this file names no source of its own but the
# harnesses:
#
#   SRC BUILD OUT     source tree, build tree (config.h), output folder
#   CORE_SRCS         libsgcore's sources (the core and the transports)
#   FC_SRCS           fc.so's sources
#   CORE_LIBS FC_LIBS the libraries each set links with
#   DEP_CFLAGS        include flags of those libraries
#   FUZZ_CC           a clang with libFuzzer (Debian: clang, libclang-rt-14-dev)
#
# Every object is built with -fsanitize=fuzzer-no-link,address,undefined and
# each target linked with -fsanitize=fuzzer into $(OUT)/fuzz_NAME.

FUZZ_CC ?= clang
TARGETS ?= jsonrpc mcp stdio http conf demux fc runner runner_client patch

SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
WARN := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror
FUZZ_CFLAGS ?= -g -O1
CFLAGS_ALL := -std=gnu11 $(FUZZ_CFLAGS) $(SAN) -fsanitize=fuzzer-no-link $(WARN) -MMD -MP
CPPFLAGS_ALL := -DHAVE_CONFIG_H -I$(BUILD) -I$(SRC)/include -I$(SRC) \
	-DPLUGINDIR='"/nonexistent"' -DSYSCONFDIR='"/nonexistent"' -DRUNNERDIR='"/nonexistent"' \
	$(DEP_CFLAGS)
LDFLAGS_ALL := $(SAN) -fsanitize=fuzzer

O := $(OUT)/obj
# V=1 shows the commands
Q := $(if $(filter 1,$(V)),,@)
objs = $(patsubst %.c,$(O)/%.o,$(filter %.c,$(1)))

core_objs := $(call objs,$(CORE_SRCS))
fc_objs := $(call objs,$(FC_SRCS) t/lib/fakehost.c core/base/buf.c)

# What each target links besides its harness, and with which libraries.
deps_jsonrpc := $(core_objs)
deps_mcp := $(core_objs)
deps_stdio := $(core_objs)
deps_http := $(core_objs)
deps_conf := $(core_objs)
deps_patch := $(core_objs)
deps_demux := $(call objs,plugins/docker/demux.c)
deps_fc := $(fc_objs)
deps_runner := $(call objs,plugins/runner/proto.c)
deps_runner_client := $(call objs,plugins/runner/proto.c plugins/runner/client.c plugins/runner/client_read.c)
libs_jsonrpc := $(CORE_LIBS)
libs_mcp := $(CORE_LIBS)
libs_stdio := $(CORE_LIBS)
libs_http := $(CORE_LIBS)
libs_conf := $(CORE_LIBS)
libs_patch := $(CORE_LIBS)
libs_demux :=
libs_fc := $(FC_LIBS)
libs_runner :=
libs_runner_client := -lpthread

all: $(patsubst %,$(OUT)/fuzz_%,$(TARGETS))

.SECONDEXPANSION:
$(OUT)/fuzz_%: $(O)/t/fuzz/fuzz_%.o $$(deps_$$*)
	@echo "  FUZZLD   $(notdir $@)"
	$(Q)$(FUZZ_CC) $(LDFLAGS_ALL) -o $@ $^ $(libs_$*)

$(O)/t/fuzz/fuzz_%.o: $(SRC)/t/fuzz/fuzz_%.c
	@mkdir -p $(@D)
	@echo "  FUZZCC   t/fuzz/fuzz_$*.c"
	$(Q)$(FUZZ_CC) $(CPPFLAGS_ALL) -DFUZZ_NAME='"$*"' $(CFLAGS_ALL) -c -o $@ $<

$(O)/%.o: $(SRC)/%.c
	@mkdir -p $(@D)
	@echo "  FUZZCC   $*.c"
	$(Q)$(FUZZ_CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -c -o $@ $<

# the objects are kept (they are not intermediate files to remove)
.SECONDARY:

-include $(shell find $(O) -name '*.d' 2>/dev/null)

.PHONY: all
