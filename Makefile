# tentaflake-worker build. Targets: all (default), check, asan, fuzz, bench, demo, install,
# uninstall, deb, man-lint, install-deps, clean. Dependencies come from pkg-config; see scripts/install-deps.

VERSION     := 0.1.0
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBEXECDIR  ?= $(PREFIX)/libexec/tentaflake-worker
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
PKGDATADIR  ?= $(PREFIX)/share/tentaflake-worker
MANDIR      ?= $(PREFIX)/share/man
DOCDIR      ?= $(PREFIX)/share/doc/tentaflake-worker
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
DESTDIR     ?=
BUILD       ?= build
CC          ?= cc
PKG_CONFIG  ?= pkg-config
FUZZ_SECONDS ?= 60

PKGS := jansson libsodium libseccomp libarchive libsystemd libcurl openssl

WARN := -std=gnu11 -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes \
	-Wmissing-prototypes -Wwrite-strings -Wimplicit-fallthrough \
	-Werror=implicit-function-declaration -Werror=incompatible-pointer-types \
	-Werror=int-conversion -Werror=return-type
HARDEN := -D_FORTIFY_SOURCE=3 -fstack-protector-strong -fstack-clash-protection -fPIE
HARDEN_LD := -pie -Wl,-z,relro,-z,now
# -Werror whenever CI is set (and always in `make check`, which passes WERROR=1).
ifneq ($(CI)$(WERROR),)
WARN += -Werror
endif

OPT      ?= -O2 -g
SANFLAGS ?=
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lpthread
# The worker itself links only these: libarchive, libcurl and libcrypto are loaded with dlopen
# by the paths that use them (artifact import, serve, streaming SHA-256), so the idle daemon
# maps none of them (issue 5; common/dlopen-util.h). Tests still link everything (they build
# tars with libarchive); dlopen then returns the library already loaded.
PKGS_LINKED := jansson libsodium libseccomp libsystemd
BIN_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS_LINKED) 2>/dev/null) -lpthread
# The absolute path of a library to dlopen: pkg-config's libdir and the SONAME of the library
# it would link ($(1): pkg-config module, $(2): library name), so the build fixes which file
# is loaded, as the linker does for the others.
dl_path = $(shell lib=$$($(PKG_CONFIG) --variable=libdir $(1) 2>/dev/null) && \
	objdump -p "$$lib/$(2).so" 2>/dev/null | awk -v d="$$lib" '$$1 == "SONAME" {print d "/" $$2}')
DL_LIBARCHIVE := $(call dl_path,libarchive,libarchive)
DL_LIBCURL    := $(call dl_path,libcurl,libcurl)
DL_LIBCRYPTO  := $(call dl_path,openssl,libcrypto)
# An empty path would only fail at run time, on the first job: refuse to build instead. Not
# for goals that compile nothing themselves (check, bench and demo install the packages first,
# then run make again).
NO_COMPILE_GOALS := check bench demo demo-build install-deps clean uninstall
ifneq ($(or $(if $(MAKECMDGOALS),,all),$(filter-out $(NO_COMPILE_GOALS),$(MAKECMDGOALS))),)
ifeq ($(and $(DL_LIBARCHIVE),$(DL_LIBCURL),$(DL_LIBCRYPTO)),)
$(error cannot find the shared libraries to dlopen (libarchive '$(DL_LIBARCHIVE)', libcurl '$(DL_LIBCURL)', libcrypto '$(DL_LIBCRYPTO)'): run scripts/install-deps (pkg-config, the -dev packages and objdump from binutils are needed))
endif
endif
DL_DEFS := -DTFW_LIBARCHIVE='"$(DL_LIBARCHIVE)"' \
	-DTFW_LIBCURL='"$(DL_LIBCURL)"' \
	-DTFW_LIBCRYPTO='"$(DL_LIBCRYPTO)"'
CFLAGS_ALL  = $(WARN) $(OPT) $(HARDEN) $(SANFLAGS) -I. -DTFW_VERSION='"$(VERSION)"' \
	-DTFW_LIBEXECDIR='"$(LIBEXECDIR)"' $(DL_DEFS) $(PKG_CFLAGS) $(CFLAGS)
LDFLAGS_ALL = $(HARDEN_LD) $(SANFLAGS) $(LDFLAGS)

# Every .c directly in a component folder goes into the library; the programs (each main()) live
# in folders of their own at the top: the worker in cli/, the in-capsule init in capsule-init/,
# the egress proxy in egress-proxy/ (docs/architecture.md).
LIB_DIRS := common parser snapshot capsule artifacts exec orchestrator approve validation controller
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_SRC  := $(wildcard cli/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
BIN      := $(BUILD)/tentaflake-worker

UNIT_SRC := $(wildcard tests/unit/test-*.c)
UNIT_BIN := $(UNIT_SRC:%.c=$(BUILD)/%)
TESTLIB_SRC := $(wildcard tests/unit/lib/*.c)
TESTLIB_OBJ := $(TESTLIB_SRC:%.c=$(BUILD)/%.o)
INTEG_SRC := $(wildcard tests/integration/test-*.c)
INTEG_BIN := $(INTEG_SRC:%.c=$(BUILD)/%)
BENCH_SRC := $(wildcard tests/bench/bench-*.c)
BENCH_BIN := $(BENCH_SRC:%.c=$(BUILD)/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz-*.c)
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/fuzz-%.c=%)
REPLAY_BIN := $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz/replay-%)

# The in-capsule init (capsule-init/): static, so it runs in any root filesystem. Not in a
# sanitizer build (SANFLAGS set, as in `make asan`): the ASan and UBSan runtimes cannot be
# linked into a static-pie, so there `all` is the worker alone.
INIT_SRC := $(wildcard capsule-init/*.c)
INIT_BIN := $(if $(and $(INIT_SRC),$(if $(strip $(SANFLAGS)),,static)),$(BUILD)/tentaflake-capsule-init)
# --gc-sections: libarchive's format table (pulled in by the pax writer for one helper) names
# every format, xar included, which would drag in libxml2 and ICU; the init only writes tar, so
# unused sections are dropped and -lxml2 is not needed (nor its static ICU dependencies).
# libseccomp: init's filter that refuses mount again once it has mounted the job's layer
# (capsule-init/layer.c).
INIT_LIBS = $(filter-out -lxml2,$(shell $(PKG_CONFIG) --static --libs libarchive libseccomp 2>/dev/null))

# The egress proxy (egress-proxy/, docs/egress.md): a program of its own, started by the worker
# for each capsule with network.allow, that drops to an unprivileged uid before it reads a byte
# the job sent. Dynamic (it resolves names through the host's NSS); it links jansson for its
# records and libseccomp for its filter, nothing else of the worker's libraries.
PROXY_SRC  := $(wildcard egress-proxy/*.c)
PROXY_BIN  := $(if $(PROXY_SRC),$(BUILD)/tentaflake-egress-proxy)
PROXY_LIBS  = $(shell $(PKG_CONFIG) --libs jansson libseccomp 2>/dev/null) -lpthread

.PHONY: all check clang-check unit fuzz-replay integration asan fuzz bench demo demo-build install uninstall deb man man-lint install-deps clean FORCE
all: $(BIN) $(INIT_BIN) $(PROXY_BIN) man

# The install paths built into the programs and the man pages. A change of PREFIX (or of
# LIBEXECDIR...) rewrites this stamp, which the sources naming TFW_LIBEXECDIR depend on: so
# `make install PREFIX=/usr` after a plain `make` recompiles them instead of installing a
# binary that looks for its init under /usr/local (issue 22, item 4). The file is rewritten
# only when its text changes (git's GIT-CFLAGS), so an unchanged PREFIX rebuilds nothing.
PATHS_STAMP := $(BUILD)/install-paths
PATHS_TEXT   = $(VERSION) $(BINDIR) $(LIBEXECDIR) $(SYSTEMDUNITDIR) $(PKGDATADIR) $(DOCDIR)
PATH_USERS  := $(shell grep -l TFW_LIBEXECDIR $(LIB_SRC) $(CLI_SRC) $(INIT_SRC) /dev/null 2>/dev/null)
$(PATH_USERS:%.c=$(BUILD)/%.o): $(PATHS_STAMP)
$(PATHS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' '$(PATHS_TEXT)' >$@.new; if cmp -s $@.new $@; then rm -f $@.new; else mv -f $@.new $@; fi

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/libtfw.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(BUILD)/libtfw.a
	$(CC) $(LDFLAGS_ALL) -o $@ $(CLI_OBJ) $(BUILD)/libtfw.a $(BIN_LIBS)

$(BUILD)/tentaflake-capsule-init: $(INIT_SRC:%.c=$(BUILD)/%.o) $(BUILD)/libtfw.a
	$(CC) -static-pie -Wl,-z,relro,-z,now -Wl,--gc-sections $(SANFLAGS) -o $@ $(INIT_SRC:%.c=$(BUILD)/%.o) $(BUILD)/libtfw.a $(INIT_LIBS)

$(PROXY_BIN): $(PROXY_SRC:%.c=$(BUILD)/%.o) $(BUILD)/libtfw.a
	$(CC) $(LDFLAGS_ALL) -o $@ $(PROXY_SRC:%.c=$(BUILD)/%.o) $(BUILD)/libtfw.a $(PROXY_LIBS)

# The proxy's unit test runs the program itself (in `make asan`, built with the sanitizers).
$(BUILD)/tests/unit/test-egress-proxy: $(PROXY_BIN)

# The job's Landlock ruleset is init's own (capsule-init/landlock.c), proved on the host here.
$(BUILD)/tests/unit/test-capsule-landlock: $(BUILD)/tests/unit/test-capsule-landlock.o $(BUILD)/capsule-init/landlock.o $(TESTLIB_OBJ) $(BUILD)/libtfw.a
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(BUILD)/capsule-init/landlock.o $(TESTLIB_OBJ) $(BUILD)/libtfw.a $(PKG_LIBS) -lcmocka

# The command line's own test reads cli/'s verb table: cli/'s objects, main() renamed so that
# cmocka's is the program's (tests/unit/test-cli-options.c).
$(BUILD)/tests/unit/cli-main.o: $(BUILD)/cli/main.o
	objcopy --redefine-sym main=tfw_cli_main $< $@
$(BUILD)/tests/unit/test-cli-options: $(BUILD)/tests/unit/test-cli-options.o $(BUILD)/tests/unit/cli-main.o \
		$(filter-out $(BUILD)/cli/main.o,$(CLI_OBJ)) $(TESTLIB_OBJ) $(BUILD)/libtfw.a
	$(CC) $(LDFLAGS_ALL) -o $@ $(filter %.o,$^) $(BUILD)/libtfw.a $(PKG_LIBS) -lcmocka

$(BUILD)/tests/unit/test-%: $(BUILD)/tests/unit/test-%.o $(TESTLIB_OBJ) $(BUILD)/libtfw.a
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(TESTLIB_OBJ) $(BUILD)/libtfw.a $(PKG_LIBS) -lcmocka

$(BUILD)/tests/integration/test-%: $(BUILD)/tests/integration/test-%.o $(TESTLIB_OBJ) $(BUILD)/libtfw.a
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(TESTLIB_OBJ) $(BUILD)/libtfw.a $(PKG_LIBS) -lcmocka

$(BUILD)/tests/bench/bench-%: $(BUILD)/tests/bench/bench-%.o $(BUILD)/libtfw.a
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libtfw.a $(PKG_LIBS)

$(BUILD)/tests/fuzz/replay-%: $(BUILD)/tests/fuzz/fuzz-%.o $(BUILD)/tests/fuzz/replay-main.o $(BUILD)/libtfw.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(PKG_LIBS)

# ---- tests -------------------------------------------------------------------------------
# `make check` is what CI runs (.ci/run, then `make asan`): install what is missing, build with
# -Werror, then every tier. TENTAFLAKE_MUST_WORK=1 turns any skip into a failure.
check: install-deps
	$(MAKE) WERROR=1 all unit-bins integration-bins fuzz-bins
	$(MAKE) clang-check
	BUILD=$(BUILD) tests/run-tests unit fuzz integration

# Every source compiled by clang too, with -Werror: clang refuses a goto that jumps over a
# variable with a cleanup attribute (gcc accepts it, and the cleanup then frees an
# uninitialised pointer: the review of issue 11 found one in exec/exec.c).
CLANG_BUILD := build-clang
clang-check:
	$(MAKE) BUILD=$(CLANG_BUILD) CC=clang OPT="-O0 -g" HARDEN="-fPIE" WERROR=1 \
		$(CLANG_BUILD)/libtfw.a $(CLI_SRC:%.c=$(CLANG_BUILD)/%.o) $(PROXY_SRC:%.c=$(CLANG_BUILD)/%.o) \
		$(INIT_SRC:%.c=$(CLANG_BUILD)/%.o)

unit-bins: $(UNIT_BIN)
integration-bins: $(INTEG_BIN) $(BIN) $(INIT_BIN) $(PROXY_BIN)
fuzz-bins: $(REPLAY_BIN)

unit: unit-bins
	BUILD=$(BUILD) tests/run-tests unit
fuzz-replay: fuzz-bins
	BUILD=$(BUILD) tests/run-tests fuzz
integration: integration-bins
	BUILD=$(BUILD) tests/run-tests integration

# The tests are told the flags the build was made with (BUILD_OPT, BUILD_SANFLAGS, BUILD_HARDEN,
# BUILD_WERROR): tests/unit/test-demo-build.sh rebuilds a copy of $(ASAN_BUILD) and must compile
# and link it as it was made (instrumented objects link only with the sanitizer runtimes).
ASAN_BUILD    := build-asan
ASAN_OPT      := -O1 -g -fno-omit-frame-pointer
ASAN_SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
ASAN_HARDEN   := -fPIE
asan:
	$(MAKE) BUILD=$(ASAN_BUILD) OPT="$(ASAN_OPT)" SANFLAGS="$(ASAN_SANFLAGS)" \
		HARDEN="$(ASAN_HARDEN)" WERROR=1 $(ASAN_BUILD)/tentaflake-worker unit-bins fuzz-bins
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		BUILD=$(ASAN_BUILD) BUILD_OPT="$(ASAN_OPT)" BUILD_SANFLAGS="$(ASAN_SANFLAGS)" \
		BUILD_HARDEN="$(ASAN_HARDEN)" BUILD_WERROR=1 tests/run-tests unit fuzz

# libFuzzer targets, built with clang, each run for FUZZ_SECONDS on a copy of its corpus.
FUZZ_BUILD := build-fuzz
fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang OPT="-O1 -g -fno-omit-frame-pointer" \
		SANFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all" \
		HARDEN="-fPIE" $(FUZZ_NAMES:%=$(FUZZ_BUILD)/tests/fuzz/libfuzzer-%)
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run-libfuzzer $(FUZZ_NAMES)

$(FUZZ_BUILD)/tests/fuzz/libfuzzer-%: $(FUZZ_BUILD)/tests/fuzz/fuzz-%.o $(FUZZ_BUILD)/libtfw.a
	clang -fsanitize=fuzzer,address,undefined -o $@ $^ $(PKG_LIBS)

# generations.sh's bare runc reference takes the worker's seccomp allow-list from the unit test's --print.
bench: install-deps
	$(MAKE) all $(BENCH_BIN) $(BUILD)/tests/unit/test-seccomp-allowlist
	BUILD=$(BUILD) tests/bench/run-bench

# The demo's build is quiet: one summary line, the whole log only when it fails, so that the
# demo's own lines are what a newcomer reads (tests/unit/test-demo-build.sh).
DEMO_BUILD_LOG = $(BUILD)/demo-build.log
demo: install-deps
	@$(MAKE) --no-print-directory demo-build
	@BUILD=$(BUILD) scripts/demo

demo-build:
	@mkdir -p $(BUILD); \
	if $(MAKE) --no-print-directory all >$(DEMO_BUILD_LOG) 2>&1; then \
		echo "build: $(BIN)$(if $(INIT_BIN), and $(INIT_BIN)) up to date, $$(grep -c -- ' -c ' $(DEMO_BUILD_LOG)) file(s) compiled (log: $(DEMO_BUILD_LOG))"; \
	else \
		cat $(DEMO_BUILD_LOG); \
		echo "build: failed (the log above is also in $(DEMO_BUILD_LOG))" >&2; \
		exit 1; \
	fi

install-deps:
	@scripts/install-deps

# systemd units (ExecStart names $(BINDIR), Documentation= the installed docs) and, for the
# per-controller files an operator writes (workspace drop-ins, the tmpfiles line of the results
# directory), templates with @NAME@, @WORKSPACE@ and @GROUP@ placeholders: docs/install.md.
UNIT_IN    := $(wildcard systemd/*.service.in)
UNIT_PLAIN := $(wildcard systemd/*.path systemd/*.timer systemd/*.socket)
# The serve worker's proxy to its server (systemd/tentaflake-worker-serve-proxy@.service.in).
SOCKET_PROXYD ?= /usr/lib/systemd/systemd-socket-proxyd
UNIT_TMPL  := $(wildcard systemd/controller-*.conf.in)
# The units, the man pages and the docs name installed paths: one substitution for all.
SUBST = sed -e 's|@BINDIR@|$(BINDIR)|g; s|@LIBEXECDIR@|$(LIBEXECDIR)|g; s|@DOCDIR@|$(DOCDIR)|g' \
	-e 's|@SYSTEMDUNITDIR@|$(SYSTEMDUNITDIR)|g; s|@PKGDATADIR@|$(PKGDATADIR)|g' \
	-e 's|@SOCKET_PROXYD@|$(SOCKET_PROXYD)|g; s|@VERSION@|$(VERSION)|g'

# Manual pages, written in mdoc (mandoc's and groff's own macros: semantic, so the test of
# tests/unit/test-man-help.sh reads each verb's flags from .Cm and .Fl), built by substituting
# the install paths; `make man-lint` is mandoc's lint at warning level.
MAN_SRC := $(wildcard man/*.in)
MAN_OUT := $(MAN_SRC:man/%.in=$(BUILD)/man/%)
man: $(MAN_OUT)
$(BUILD)/man/%: man/%.in $(PATHS_STAMP) Makefile
	@mkdir -p $(dir $@)
	$(SUBST) $< >$@.tmp && mv -f $@.tmp $@
man-lint: $(MAN_OUT)
	mandoc -T lint -W warning $(MAN_OUT)

COMPLETION := completion/tentaflake-worker.bash
DOC_FILES  := README.md LICENSE $(wildcard docs/*.md)

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR)
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/tentaflake-worker
	# Claude Code's shell prefix (controller/harness-prefix.h): the binary under a name of its own,
	# where only root can change it.
	ln -sfn tentaflake-worker $(DESTDIR)$(BINDIR)/tentaflake-worker-shell
	$(if $(INIT_BIN),install -m 0755 $(INIT_BIN) $(DESTDIR)$(LIBEXECDIR)/tentaflake-capsule-init)
	$(if $(PROXY_BIN),install -m 0755 $(PROXY_BIN) $(DESTDIR)$(LIBEXECDIR)/tentaflake-egress-proxy)
	install -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(PKGDATADIR)
	set -e; for u in $(UNIT_IN) $(UNIT_PLAIN); do \
		n=$$(basename "$$u" .in); \
		$(SUBST) "$$u" >"$(DESTDIR)$(SYSTEMDUNITDIR)/$$n"; \
		chmod 0644 "$(DESTDIR)$(SYSTEMDUNITDIR)/$$n"; \
	done
	install -m 0644 $(UNIT_TMPL) $(DESTDIR)$(PKGDATADIR)/
	install -d $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	install -m 0644 $(filter %.5,$(MAN_OUT)) $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(filter %.8,$(MAN_OUT)) $(DESTDIR)$(MANDIR)/man8/
	# tentaflake-worker-shell's page is the worker's (its `shell` verb): a .so redirect, which
	# survives the package's gzip where a symbolic link to the uncompressed name would not.
	printf '.so man8/tentaflake-worker.8\n' >$(DESTDIR)$(MANDIR)/man8/tentaflake-worker-shell.8
	chmod 0644 $(DESTDIR)$(MANDIR)/man8/tentaflake-worker-shell.8
	install -d $(DESTDIR)$(BASHCOMPDIR)
	install -m 0644 $(COMPLETION) $(DESTDIR)$(BASHCOMPDIR)/tentaflake-worker
	install -d $(DESTDIR)$(DOCDIR)
	install -m 0644 $(DOC_FILES) $(DESTDIR)$(DOCDIR)/

# What `install` put there, with the same PREFIX and DESTDIR; the directories only when empty.
# Configuration (/etc/tentaflake), state and results are the operator's and stay.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/tentaflake-worker $(DESTDIR)$(BINDIR)/tentaflake-worker-shell \
		$(DESTDIR)$(LIBEXECDIR)/tentaflake-capsule-init \
		$(DESTDIR)$(LIBEXECDIR)/tentaflake-egress-proxy
	rm -f $(foreach u,$(UNIT_IN) $(UNIT_PLAIN),$(DESTDIR)$(SYSTEMDUNITDIR)/$(notdir $(u:.in=)))
	rm -f $(foreach t,$(UNIT_TMPL),$(DESTDIR)$(PKGDATADIR)/$(notdir $(t)))
	rm -f $(foreach m,$(filter %.5,$(MAN_OUT)),$(DESTDIR)$(MANDIR)/man5/$(notdir $(m)))
	rm -f $(foreach m,$(filter %.8,$(MAN_OUT)),$(DESTDIR)$(MANDIR)/man8/$(notdir $(m))) \
		$(DESTDIR)$(MANDIR)/man8/tentaflake-worker-shell.8
	rm -f $(DESTDIR)$(BASHCOMPDIR)/tentaflake-worker
	rm -f $(foreach d,$(DOC_FILES),$(DESTDIR)$(DOCDIR)/$(notdir $(d)))
	-rmdir $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(PKGDATADIR) $(DESTDIR)$(DOCDIR) 2>/dev/null
	@# The workers' generation stores (memory only: docs/snapshot.md, "After a restart").
	-[ -n "$(DESTDIR)" ] || awk '$$1 == "tentaflake-store" && $$3 == "tmpfs" { print $$2 }' /proc/self/mounts | \
		while read -r m; do umount -l "$$(printf '%b' "$$m")"; done

# The Debian package, made with dpkg-deb from what `make install` puts below a staging root
# (packaging/deb/README.md says why not debhelper): PREFIX=/usr, the units in /lib/systemd/system
# as in every bookworm package; Depends from dpkg-shlibdeps, the packages of the libraries the
# worker dlopens, and runsc. Built in its own directory ($(DEB_BUILD)), so the tree of a plain
# `make` keeps its /usr/local paths.
DEB_BUILD ?= build-deb
DEB_OUT   ?= build
deb:
	rm -rf $(DEB_BUILD)/root && mkdir -p $(DEB_BUILD)
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL $(MAKE) --no-print-directory BUILD=$(DEB_BUILD) PREFIX=/usr \
		SYSTEMDUNITDIR=/lib/systemd/system DESTDIR=$(abspath $(DEB_BUILD))/root -j$$(nproc) install >$(DEB_BUILD)/make.log 2>&1 || \
		{ cat $(DEB_BUILD)/make.log; exit 1; }
	DL_LIBS="$(DL_LIBARCHIVE) $(DL_LIBCURL) $(DL_LIBCRYPTO)" packaging/deb/build-deb $(DEB_BUILD)/root $(DEB_OUT) $(VERSION)

clean:
	rm -rf build build-asan build-fuzz build-clang build-deb

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
