# ludo - build, test, run and install.
#
#   make            build build/ludo, build/libludo.a, build/libludo.so
#                   (profile-guided: PGO=0 builds without, see PGO below)
#   make run        install deps if missing, build, run the echo example
#   make test       install deps if missing, build, run every test
#   make asan       ASan+UBSan build in build-asan/ and run the tests on it
#   make bench      run the benchmarks (bench/)
#   make bench-serve the figures of `ludo serve` (bench/serve_bench.c)
#   make bench-llm  the figure of ludo.llm: 1,000 LLM requests in flight
#                   against the mock server (bench/llm_bench.c)
#   make lint       luacheck over the tree's Lua (.luacheckrc)
#   make fuzz       libFuzzer targets (spec/fuzz), FUZZ_SECONDS each
#   make fuzz-smoke the same, a few seconds each (run by make test)
#   make install    PREFIX=/usr/local: binary, libraries (libludo.so with
#                   its SONAME), headers, ludo.pc, Lua modules, Lua C
#                   modules; make uninstall removes exactly those
#   make clean

PREFIX   ?= /usr/local
BUILD    ?= build
CC       ?= cc
PKGS     := lua5.4 libuv jansson libpcre2-8 nettle libcurl
OPT      ?= -O2
SAN      ?=
# Link-time optimisation of the programs (the CLI, tests, benches,
# examples): objects carry GCC's IR besides their code (fat), so
# libludo.so and other compilers' links use them as they are, and each
# program is optimised across ludo and Lua (lua_* calls inlined into the
# JSON and result code). An echo step: 27.3k -> 25.1k instructions
# (docs/performance.md, "Link-time optimisation"). The ASan and fuzz
# builds go without (LTO=).
LTO      ?= -flto=auto -ffat-lto-objects

# Profile-guided optimisation (docs/performance.md, "Profile-guided
# build"). PGO=1 (the default): an instrumented build of the CLI, Lua and
# the examples' host library goes to $(BUILD)/pgo/, runs
# scripts/pgo-train.sh (the examples through `ludo run`, `ludo eval` and
# `ludo serve`), and everything in $(BUILD) and $(LUA_DIR) is then compiled
# with GCC's profile of that run; any change to a source runs it again.
# PGO=0 builds without (make asan and the fuzz builds do); PGO=gen is the
# instrumented pass itself. The profile names objects by their path below
# the tree, so BUILD and LUA_DIR must be relative paths. The final pass
# keeps warnings as warnings in the objects that have a profile (PGO_OBJ):
# GCC reports "Missing counts for called function" for functions inlined
# in the instrumented pass, a diagnostic no option turns off; the
# instrumented pass compiles the same files with -Werror.
PGO      ?= 1
PGO_DIR  := $(BUILD)/pgo
ifeq ($(PGO),gen)
PGO_FLAGS := -fprofile-generate=$(PGO_DATA) -fprofile-prefix-path=$(PGO_ROOT) \
  -fprofile-update=prefer-atomic
else ifeq ($(PGO),1)
ifneq ($(filter /%,$(BUILD) $(LUA_DIR)),)
$(error PGO=1 needs relative BUILD and LUA_DIR (the profile names objects by their path below the tree); use PGO=0)
endif
PGO_FLAGS := -fprofile-use=$(abspath $(PGO_DIR)/data) \
  -fprofile-prefix-path=$(CURDIR) -fprofile-partial-training \
  -Wno-missing-profile
PGO_OBJ  := -Wno-error
PGO_DEP  := $(PGO_DIR)/trained
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# runtime/net: http-parser parses HTTP/1.1 and wslay frames WebSocket
# (DESIGN.md: no hand-written protocol parsers); nettle gives the SHA-1
# and base64 of the WebSocket handshake. The first two ship no .pc file.
NET_LIBS   := -lhttp_parser -lwslay

CFLAGS_BASE := -std=c11 $(OPT) -g -fPIC -Wall -Wextra -Werror \
  -Wno-unused-parameter -fvisibility=hidden -D_GNU_SOURCE \
  -Iinclude -Iruntime $(PKG_CFLAGS) $(SAN) $(LTO) $(CFLAGS)
CFLAGS_ALL := $(CFLAGS_BASE) $(PGO_FLAGS)
# Compiled without the profile in the final pass: runtime/env/session.c
# holds the paths that ask for the next sessions' memory, which the
# training never takes with blocking calls (a host stepping thousands of
# sessions in turn); with the profile they ran 5-8 % slower at 4,096
# sessions, and without it the 1-session step keeps its gain
# (docs/performance.md, "Profile-guided build").
PGO_SKIP := runtime/env/session.c
LDLIBS_ALL := $(PKG_LIBS) $(NET_LIBS) -lm -lpthread $(SAN) $(LDFLAGS) \
  $(PGO_FLAGS)
# Programs (ludo, tests, bench, examples) link Lua statically: Debian's
# lua5.4 source with ludo's patches (scripts/lua-build.sh and
# scripts/patches/: Debian's 5.4.4 lets a __concat metamethod corrupt the
# heap; and shared prototypes, docs/performance.md). So do libludo.a and
# libludo.so, the embedders' libraries: both carry that Lua (libludo.so
# exports its C API for host functions and binds its own calls to it,
# -Bsymbolic). libludo-cmod.so, the Lua C modules for a stock lua5.4
# interpreter, links the system's liblua5.4 (no shared prototypes there).
LUA_DIR  := build-lua
LUA_A    := $(LUA_DIR)/liblua.a
# The patched source (its headers, lua.c): expanded when a recipe runs,
# after $(LUA_A) has unpacked it.
# LUA_SRC_DIR: where scripts/lua-build.sh unpacks it (the PGO pass
# compiles the final build's copy).
LUA_SRC_DIR ?= $(LUA_DIR)/src
LUA_SRCDIR = $(firstword $(wildcard $(LUA_SRC_DIR)/lua5.4-*/src))
PROG_LIBS := $(LUA_A) $(filter-out -llua5.4,$(LDLIBS_ALL)) -ldl $(LTO)

LIB_SRC  := $(sort $(wildcard runtime/base/*.c runtime/core/*.c runtime/script/*.c \
              runtime/env/*.c runtime/net/*.c runtime/serve/*.c runtime/bind/*.c \
              runtime/*.c))
CLI_SRC  := $(sort $(wildcard runtime/cli/*.c))
LUA_SRC  := $(sort $(wildcard lua/ludo/*.lua lua/ludo/*/*.lua rubrics/*.lua \
              features/*.lua))
CTEST_SRC := $(sort $(wildcard spec/c/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/embedded.o
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
CTEST_OBJ := $(CTEST_SRC:%.c=$(BUILD)/obj/%.o)

# Lua C modules loadable by a stock lua5.4 (busted specs, Lua hosts): each is
# a link to libludo-cmod.so, which exports luaopen_ludo_<name>.
CMODS    := json re host client

# Host libraries the CLI specs load (spec/fixtures/hostlib/): one whose
# init fails, one without ludo_host_init.
HOSTLIB_FIX := $(BUILD)/fixtures/hostlib-fails.so \
  $(BUILD)/fixtures/hostlib-nosym.so

.PHONY: FORCE all deps run test test-only asan bench bench-serve bench-llm bench-then install \
  uninstall \
  clean lint \
  examples \
  fuzz fuzz-smoke fuzz-build
all: $(BUILD)/ludo $(BUILD)/libludo.a $(BUILD)/libludo.so $(BUILD)/libludo-cmod.so \
     $(CMODS:%=$(BUILD)/cmod/ludo/%.so) $(BUILD)/ludo-ctest examples \
     $(HOSTLIB_FIX) $(BUILD)/lua

deps:
	@scripts/deps.sh

# Objects are rebuilt when the flags change (a PGO=0 build in the same
# folder, another OPT): $(FLAGS_FILE) holds the last flags, rewritten only
# when they differ.
FLAGS_FILE := $(BUILD)/cflags.txt
$(FLAGS_FILE): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CFLAGS_ALL) $(PGO_OBJ)' | cmp -s - $@ || \
	  echo '$(CFLAGS_ALL) $(PGO_OBJ)' > $@
FORCE:

$(BUILD)/obj/%.o: %.c $(FLAGS_FILE) $(PGO_DEP)
	@mkdir -p $(dir $@)
	$(CC) $(if $(filter $<,$(PGO_SKIP)),$(CFLAGS_BASE),$(CFLAGS_ALL) \
	  $(PGO_OBJ)) -MMD -MP -DLUDO_SOURCE_ROOT='"$(CURDIR)"' -c $< -o $@

$(BUILD)/gen/embedded.c: scripts/embed.lua $(LUA_SRC)
	@mkdir -p $(dir $@)
	lua5.4 scripts/embed.lua $@ $(LUA_SRC)

$(BUILD)/obj/gen/embedded.o: $(BUILD)/gen/embedded.c $(FLAGS_FILE) $(PGO_DEP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PGO_OBJ) -c $< -o $@

# Lua's objects, as scripts/lua-build.sh left them next to its source.
LUA_OBJ = $(wildcard $(LUA_DIR)/src/l*.o)

$(BUILD)/libludo.a: $(LIB_OBJ) $(LUA_A)
	@rm -f $@
	ar rcs $@ $(LIB_OBJ) $(LUA_OBJ)

VERSION  := 0.1.0
SOMAJOR  := 0
SONAME   := libludo.so.$(SOMAJOR)

$(BUILD)/libludo.so: $(LIB_OBJ) $(LUA_A)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-Bsymbolic -o $@.$(VERSION) \
	  $(LIB_OBJ) -Wl,--whole-archive $(LUA_A) -Wl,--no-whole-archive \
	  $(filter-out -llua5.4,$(LDLIBS_ALL)) -ldl
	ln -sf libludo.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

$(BUILD)/libludo-cmod.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDLIBS_ALL)

$(LUA_A): scripts/lua-build.sh $(wildcard scripts/patches/lua-*.patch) \
    $(PGO_DEP)
	@rm -f $(LUA_A)
	LUA_CFLAGS="$(LUA_CFLAGS) $(PGO_FLAGS) $(PGO_OBJ)" LUA_SRC_DIR=$(LUA_SRC_DIR) \
	  scripts/lua-build.sh $(LUA_DIR)

# The instrumented pass and its training run (PGO, above): the profile
# lands in $(PGO_DIR)/data, named by each object's path below the tree.
PGO_INPUTS := $(LIB_SRC) $(CLI_SRC) $(LUA_SRC) \
  $(wildcard include/*.h runtime/*.h runtime/*/*.h) \
  Makefile scripts/pgo-train.sh scripts/lua-build.sh scripts/embed.lua \
  $(wildcard scripts/patches/lua-*.patch examples/*/*.lua \
    examples/*/*/*.lua examples/gridworld/*.[ch])
$(PGO_DIR)/trained: $(PGO_INPUTS)
	@rm -rf $(PGO_DIR)/data $@
	@mkdir -p $(PGO_DIR)
	@$(MAKE) --no-print-directory PGO=gen BUILD=$(PGO_DIR)/$(BUILD) \
	  LUA_DIR=$(PGO_DIR)/$(LUA_DIR) LUA_SRC_DIR=$(LUA_SRC_DIR) \
	  PGO_ROOT=$(abspath $(PGO_DIR)) PGO_DATA=$(abspath $(PGO_DIR)/data) \
	  $(PGO_DIR)/$(BUILD)/ludo $(PGO_DIR)/$(BUILD)/lua \
	  $(PGO_DIR)/$(BUILD)/gridworld-host.so
	scripts/pgo-train.sh $(PGO_DIR)/$(BUILD)
	@touch $@

# The busted specs' interpreter: lua.c of the same patched source, its
# symbols exported, so the C modules it loads (libludo.so's, busted's own)
# bind to the patched Lua: specs driving ludo.host then run on what the
# programs run, shared prototypes included (scripts/test.sh).
$(BUILD)/lua: $(LUA_A)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu99 -O2 -g -DLUA_COMPAT_5_3 -DLUA_USE_LINUX -I$(LUA_SRCDIR) \
	  $(SAN) $(PGO_FLAGS) -o $@ $(LUA_SRCDIR)/lua.c $(LUA_A) -Wl,-E -lm -ldl

$(BUILD)/ludo: $(CLI_OBJ) $(BUILD)/libludo.a $(LUA_A)
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/libludo.a $(PROG_LIBS) -Wl,-E

$(BUILD)/cmod/ludo/%.so: $(BUILD)/libludo-cmod.so
	@mkdir -p $(dir $@)
	ln -sf ../../libludo-cmod.so $@

# test-evalresult.c tests parts of the CLI (eval_result.c, buf.c; no I/O).
CTEST_CLI_OBJ := $(BUILD)/obj/runtime/cli/eval_result.o \
  $(BUILD)/obj/runtime/cli/buf.o
$(BUILD)/ludo-ctest: $(CTEST_OBJ) $(CTEST_CLI_OBJ) $(BUILD)/libludo.a $(LUA_A)
	$(CC) -o $@ $(CTEST_OBJ) $(CTEST_CLI_OBJ) $(BUILD)/libludo.a $(PROG_LIBS)

# Examples with C parts. A host library (gridworld-host.so) is a shared
# object without libludo or Lua in it: it uses those of the program that
# loads it (the ludo binary exports them, -Wl,-E).
examples: $(BUILD)/gridworld $(BUILD)/hostloop $(BUILD)/gridworld-host.so \
  $(BUILD)/gameloop
$(BUILD)/hostloop: examples/hostloop/main.c $(BUILD)/libludo.a include/ludo.h \
    $(LUA_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

GRID_SRC := examples/gridworld/game.c examples/gridworld/main.c
$(BUILD)/gridworld: $(GRID_SRC) examples/gridworld/game.h \
    $(BUILD)/libludo.a include/ludo.h $(LUA_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $(GRID_SRC) $(BUILD)/libludo.a $(PROG_LIBS)

$(BUILD)/gridworld-host.so: examples/gridworld/host.c \
    examples/gridworld/game.c examples/gridworld/game.h include/ludo.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -shared -o $@ examples/gridworld/host.c \
	  examples/gridworld/game.c

# Host libraries the CLI specs load (HOSTLIB_FIX, above).
$(BUILD)/fixtures/hostlib-%.so: spec/fixtures/hostlib/%.c include/ludo.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -shared -o $@ $<

$(BUILD)/gameloop: examples/gameloop/main.c $(BUILD)/libludo.a \
    include/ludo.h $(LUA_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

run: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/ludo run examples/echo --episodes 3 --seed 7

test: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) scripts/test.sh

test-only: all
	@BUILD=$(BUILD) scripts/test.sh

# Lua is built with the sanitizers too (build-lua-asan/), so ASan sees the
# interpreter's own reads and writes, not only the libc calls it makes.
ASAN_SAN := -fsanitize=address,undefined -fno-omit-frame-pointer \
  -fno-sanitize-recover=undefined
asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 LTO= PGO=0 \
	  LUA_DIR=build-lua-asan LUA_CFLAGS="$(ASAN_SAN)" SAN="$(ASAN_SAN)" all
	@BUILD=build-asan LUDO_ASAN=1 scripts/test.sh

$(BUILD)/ludo-bench: bench/core_bench.c bench/table.c bench/table.h \
  $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ bench/core_bench.c bench/table.c \
	  $(BUILD)/libludo.a $(PROG_LIBS)

# Fuzzing (clang's libFuzzer with ASan+UBSan): the library is built with
# coverage in build-fuzz/, each spec/fuzz/fuzz_<name>.c links against it.
FUZZ_BUILD   := build-fuzz
FUZZ_NAMES   := json schema step re pattern net client
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)

fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang OPT=-O1 LTO= PGO=0 \
	  SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" \
	  $(FUZZ_BUILD)/libludo.a
	@$(MAKE) --no-print-directory LTO= PGO=0 $(FUZZ_BINS)

$(FUZZ_BUILD)/fuzz_%: spec/fuzz/fuzz_%.c spec/fuzz/fuzz.c spec/fuzz/fuzz.h \
    $(FUZZ_BUILD)/libludo.a $(LUA_A)
	clang -std=c11 -O1 -g -Wall -Wextra -Werror -Iinclude -Iruntime -Ispec/fuzz $(PKG_CFLAGS) \
	  -D_GNU_SOURCE $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< spec/fuzz/fuzz.c \
	  $(FUZZ_BUILD)/libludo.a $(PROG_LIBS)

# Runs each target for FUZZ_SECONDS on a copy of its seed corpus; stops at
# the first target that finds a crash (its log is kept in build-fuzz/).
# Leaks are checked once at exit (LSan), not after every input: the Lua
# collector frees an input's objects later, which would make libFuzzer scan
# the heap each time.
fuzz: fuzz-build
	@for t in $(FUZZ_NAMES); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t && \
	  cp spec/fuzz/corpus/$$t/* $(FUZZ_BUILD)/corpus/$$t/ && \
	  echo "== fuzz_$$t ($(FUZZ_SECONDS) s)" && \
	  if ASAN_OPTIONS=detect_leaks=1 $(FUZZ_BUILD)/fuzz_$$t \
	      -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	      -detect_leaks=0 \
	      -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/ \
	      $(FUZZ_BUILD)/corpus/$$t > $(FUZZ_BUILD)/fuzz_$$t.log 2>&1; then \
	    grep -E "^(Done|stat::number_of_executed_units)" \
	      $(FUZZ_BUILD)/fuzz_$$t.log; \
	  else \
	    tail -n 40 $(FUZZ_BUILD)/fuzz_$$t.log; exit 1; \
	  fi; \
	done

fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=5

$(BUILD)/ludo-json-bench: bench/json_bench.c $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

$(BUILD)/ludo-echo-rate: bench/echo_rate.c $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

# The echo step against the library the runtime-core issue measured it on
# (bench/then_and_now.sh builds that commit in a temporary worktree).
bench-then: all $(BUILD)/ludo-echo-rate
	@BUILD=$(BUILD) bench/then_and_now.sh

# Asking for the next sessions' memory ahead, on and off in alternated
# rounds (reads the runtime's record to set the threshold).
$(BUILD)/ludo-prefetch-ab: bench/prefetch_ab.c $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

$(BUILD)/ludo-step-count: bench/step_count.c $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

# Every step of 4,096 sessions timed: the worst, and those over 1 ms.
$(BUILD)/ludo-step-stalls: bench/step_stalls.c $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

# Blocking steps/s at N sessions against 1, alternated, for any environment.
$(BUILD)/ludo-scale-ratio: bench/scale_ratio.c bench/table.c bench/table.h \
  $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ bench/scale_ratio.c bench/table.c \
	  $(BUILD)/libludo.a $(PROG_LIBS)

# Reads Lua's internal structures: built against the headers of the Lua
# that build-lua compiled (scripts/lua-build.sh).
$(BUILD)/ludo-heap-map: bench/heap_map.c $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -I$(LUA_SRCDIR) \
	  -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

$(BUILD)/ludo-memory: bench/session_memory.c $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

# The load generator of `ludo serve` (bench/serve_bench.c): libuv and
# wslay only, no libludo; it starts build/ludo serve itself.
$(BUILD)/ludo-serve-bench: bench/serve_bench.c bench/table.c bench/table.h
	$(CC) $(CFLAGS_ALL) -o $@ bench/serve_bench.c bench/table.c \
	  $(shell pkg-config --libs libuv) -lwslay -lm

bench: all $(BUILD)/ludo-bench $(BUILD)/ludo-memory $(BUILD)/ludo-json-bench \
  $(BUILD)/ludo-step-count $(BUILD)/ludo-heap-map \
  $(BUILD)/ludo-serve-bench
	@BUILD=$(BUILD) scripts/bench.sh

$(BUILD)/ludo-llm-bench: bench/llm_bench.c bench/table.c bench/table.h \
  spec/c/mockllm.c spec/c/mockllm.h $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ bench/llm_bench.c bench/table.c \
	  spec/c/mockllm.c $(BUILD)/libludo.a $(PROG_LIBS)

# The bench-only C mock LLM server of bench-llm (bench/llm_mock.c).
$(BUILD)/ludo-llm-mock: bench/llm_mock.c
	$(CC) $(CFLAGS_ALL) -o $@ $< $(shell pkg-config --libs libuv) -lhttp_parser

# The issue's figure (10,000 requests, 1,000 in flight, 50 ms) against the
# C mock, then the same at 200 in flight, then against the Node mock
# (docs/llm.md: why the figure uses the C one).
bench-llm: all $(BUILD)/ludo-llm-bench $(BUILD)/ludo-llm-mock
	$(BUILD)/ludo-llm-bench 10000 1000 50 c
	$(BUILD)/ludo-llm-bench 2000 200 50 c
	$(BUILD)/ludo-llm-bench 10000 1000 50 node

bench-serve: all $(BUILD)/ludo-serve-bench
	$(BUILD)/ludo-serve-bench --ludo $(BUILD)/ludo \
	  --json $(BUILD)/bench-serve.json

# Installed layout: bin/ludo; lib/libludo.a, lib/libludo.so.VERSION with
# its SONAME link and the development link; include/ludo.h, ludo_defs.h;
# include/ludo/: the headers of the Lua the libraries carry (lua.h,
# luaconf.h, lualib.h, lauxlib.h); lib/pkgconfig/ludo.pc;
# share/ludo/{lua,rubrics,features}: the Lua modules;
# lib/ludo/libludo-cmod.so and lib/ludo/cmod/ludo/*.so: the Lua C modules
# for a stock lua5.4 (links to it), found by `eval "$(ludo lua-path)"`
# (LUA_PATH and LUA_CPATH).
LUA_HEADERS := lua.h luaconf.h lualib.h lauxlib.h
LUDO_DIRS := lua rubrics $(wildcard features)
D := $(DESTDIR)$(PREFIX)

install: all
	install -d $(D)/bin $(D)/lib/pkgconfig $(D)/include/ludo $(D)/share/ludo \
	  $(D)/lib/ludo/cmod/ludo
	install -m 755 $(BUILD)/ludo $(D)/bin/ludo
	install -m 644 $(BUILD)/libludo.a $(D)/lib/libludo.a
	install -m 755 $(BUILD)/libludo.so.$(VERSION) \
	  $(D)/lib/libludo.so.$(VERSION)
	ln -sf libludo.so.$(VERSION) $(D)/lib/$(SONAME)
	ln -sf $(SONAME) $(D)/lib/libludo.so
	install -m 644 include/ludo.h include/ludo_defs.h $(D)/include/
	install -m 644 $(LUA_HEADERS:%=$(LUA_SRCDIR)/%) $(D)/include/ludo/
	install -m 755 $(BUILD)/libludo-cmod.so $(D)/lib/ludo/libludo-cmod.so
	cp -R $(LUDO_DIRS) $(D)/share/ludo/
	for m in $(CMODS); do \
	  ln -sf ../../libludo-cmod.so $(D)/lib/ludo/cmod/ludo/$$m.so; done
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
	  scripts/ludo.pc.in > $(D)/lib/pkgconfig/ludo.pc

uninstall:
	rm -f $(D)/bin/ludo $(D)/lib/libludo.a $(D)/lib/libludo.so \
	  $(D)/lib/$(SONAME) $(D)/lib/libludo.so.$(VERSION) \
	  $(D)/include/ludo.h $(D)/include/ludo_defs.h \
	  $(D)/lib/pkgconfig/ludo.pc $(CMODS:%=$(D)/lib/ludo/cmod/ludo/%.so) \
	  $(D)/lib/ludo/libludo-cmod.so $(LUA_HEADERS:%=$(D)/include/ludo/%)
	rm -rf $(D)/share/ludo
	-rmdir $(D)/lib/ludo/cmod/ludo $(D)/lib/ludo/cmod $(D)/lib/ludo \
	  $(D)/include/ludo \
	  $(D)/lib/pkgconfig $(D)/include $(D)/bin $(D)/lib $(D)/share \
	  2>/dev/null

lint:
	luacheck lua rubrics examples spec

clean:
	rm -rf build build-asan build-fuzz build-lua build-lua-asan

-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/obj/*/*/*.d \
  $(BUILD)/obj/*/*/*/*.d)

# `ludo eval`'s figures (bench/eval_bench.sh): its step rate against
# ludo-bench's, and re-reading 100,000 results for --resume.
EVAL_BENCH_OBJ := $(BUILD)/obj/runtime/cli/eval_output.o \
  $(BUILD)/obj/runtime/cli/eval_plan.o $(BUILD)/obj/runtime/cli/eval_record.o \
  $(BUILD)/obj/runtime/cli/eval_scan.o $(BUILD)/obj/runtime/cli/eval_json.o \
  $(BUILD)/obj/runtime/cli/buf.o
$(BUILD)/ludo-eval-resume-bench: bench/eval_resume.c $(EVAL_BENCH_OBJ) \
  $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -Iruntime -o $@ $< $(EVAL_BENCH_OBJ) \
	  $(BUILD)/libludo.a $(PROG_LIBS)

$(BUILD)/ludo-eval-chain: bench/eval_chain.c $(BUILD)/libludo.a $(LUA_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libludo.a $(PROG_LIBS)

bench-eval: all $(BUILD)/ludo-bench $(BUILD)/ludo-eval-resume-bench \
  $(BUILD)/ludo-eval-chain
	@BUILD=$(BUILD) bench/eval_bench.sh
