# SPDX-License-Identifier: Apache-2.0
# kctrld: plain GNU Makefile. Sources are discovered by directory so that a new
# component is one new .c/.h pair and no Makefile edit:
#   daemon/*.c, daemon/LAYER/*.c (minus main.c) -> $(B)/libkctrld.a, linked into kctrld and tests
#   daemon/main.c              -> $(B)/kctrld
#   tests/apisim/*.c           -> $(B)/kube-apisim (independent of daemon/, see docs/api-contract.md 15.4)
#   plugins/NAME/*.c           -> $(B)/plugins/NAME.so
#   tests/unit/test_*.c        -> $(B)/tests/test_*      (cmocka)
#   tests/bench/bench_*.c      -> $(B)/bench/bench_*
#   tests/fuzz/fuzz_*.c        -> $(B)/fuzz/fuzz_*       (clang libFuzzer, `make fuzz`)
# Variants: `make SAN=address` builds into build-asan/ with ASan+UBSan,
# `make SAN=thread` into build-tsan/, `make SAN=coverage` into build-cov/ (gcov).

VERSION   := 0.1.0
PREFIX    ?= /usr/local
DESTDIR   ?=
CC        ?= cc
SAN       ?=

ifeq ($(SAN),address)
  B        := build-asan
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
  OPT      := -O1 -g
else ifeq ($(SAN),thread)
  B        := build-tsan
  SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
  OPT      := -O1 -g
else ifeq ($(SAN),coverage)
  B        := build-cov
  SANFLAGS := --coverage
  OPT      := -O0 -g
else
  B        := build
  SANFLAGS :=
  OPT      := -O2 -g
  HARDEN   := -D_FORTIFY_SOURCE=2
endif

PKGS      := libuv libcurl yajl yaml-0.1 libmicrohttpd gnutls libsystemd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN      := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
             -Wformat=2 -Wvla -Wimplicit-fallthrough -Wno-unused-parameter
CFLAGS    ?=
CFLAGS    += -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) $(HARDEN) -fstack-protector-strong \
             -MMD -MP -Idaemon -Iinclude -DKCTRLD_VERSION=\"$(VERSION)\" $(PKG_CFLAGS) $(SANFLAGS)
LDFLAGS   += $(SANFLAGS) -Wl,-z,relro,-z,now
LDLIBS    := $(PKG_LIBS) -lpthread -ldl -lm
# kube-apisim also links libcrypto: it makes its own CA and server
# certificate when it authenticates by token (tests/apisim/certgen.h).
APISIM_LIBS := $(shell pkg-config --libs libcrypto 2>/dev/null)

# `kctrld version` names the commit it was built from: `git describe` of this
# tree, "-dirty" with uncommitted changes, "unknown" outside a git checkout
# (a source tarball); GIT_COMMIT=... on the command line overrides it. Only
# daemon/cli.c gets the define; it is rebuilt when the value changes.
GIT_COMMIT ?= $(shell git -C '$(CURDIR)' describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)

DAEMON_SRC := $(filter-out daemon/main.c,$(wildcard daemon/*.c daemon/*/*.c))
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(B)/obj/%.o)
APISIM_SRC := $(wildcard tests/apisim/*.c)
APISIM_OBJ := $(APISIM_SRC:%.c=$(B)/obj/%.o)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
UNIT_HELPER_SRC := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
UNIT_HELPER_OBJ := $(UNIT_HELPER_SRC:%.c=$(B)/obj/%.o)
BENCH_SRC  := $(wildcard tests/bench/bench_*.c)
BENCH_BIN  := $(BENCH_SRC:tests/bench/%.c=$(B)/bench/%)
PLUGIN_DIRS := $(patsubst %/,%,$(dir $(wildcard plugins/*/*.c)))
PLUGIN_NAMES := $(sort $(notdir $(PLUGIN_DIRS)))
PLUGIN_SO  := $(PLUGIN_NAMES:%=$(B)/plugins/%.so)
# C++ test plugins (tests/unit/plugins/*.cpp): the SDK header must compile as
# C++17; test_plugin_sdk loads them from $(B)/tests/plugins.
CXX       ?= g++
CXXFLAGS_PLUGIN := -std=c++17 -Wall -Wextra -Werror -O2 -g -fPIC -fvisibility=hidden -Iinclude
UNIT_CXX_SO := $(patsubst tests/unit/plugins/%.cpp,$(B)/tests/plugins/%.so,$(wildcard tests/unit/plugins/*.cpp))

.PHONY: man FORCE all test test-binaries check unit demo bench bench-deps bench-micro fuzz fuzz-run fuzz-replay install format lint clean deps tsan asan \
        valgrind coverage faults soak binaries deb deb-deps
all: $(B)/kctrld $(B)/kube-apisim $(PLUGIN_SO) $(UNIT_BIN) $(BENCH_BIN) $(UNIT_CXX_SO)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $<"; $(CC) $(CFLAGS) -c $< -o $@

$(B)/libkctrld.a: $(DAEMON_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/kctrld: $(B)/obj/daemon/main.o $(B)/libkctrld.a
	$(CC) $(LDFLAGS) -rdynamic -o $@ $^ $(LDLIBS)

$(B)/kube-apisim: $(APISIM_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(APISIM_LIBS)

$(B)/tests/%: $(B)/obj/tests/unit/%.o $(UNIT_HELPER_OBJ) $(B)/libkctrld.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(LDLIBS)

$(B)/tests/plugins/%.so: tests/unit/plugins/%.cpp include/kctrld/plugin.h include/kctrld/plugin_util.h
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_PLUGIN) -shared -o $@ $<

$(B)/obj/daemon/cli.o: CFLAGS += -DKCTRLD_GIT_COMMIT='"$(GIT_COMMIT)"'
$(B)/obj/daemon/cli.o: $(B)/git-commit
$(B)/git-commit: FORCE
	@mkdir -p $(dir $@)
	@echo '$(GIT_COMMIT)' | cmp -s - $@ || echo '$(GIT_COMMIT)' > $@
FORCE:

# The man pages, from the docs (debian/md2man): kctrld(8) from
# docs/operations.md, whose "Command line" section opens with the synopsis
# block of `kctrld --help` (tests/integration/test_flags.py holds the two and
# the flag table equal); kctrld.yaml(5) from docs/config.md; kube-apisim(1)
# from docs/apisim.md. `make install` and the Debian package install them.
MD2MAN = python3 debian/md2man --version $(VERSION)
MAN_PAGES := $(B)/man/kctrld.8 $(B)/man/kctrld.yaml.5 $(B)/man/kube-apisim.1
man: $(MAN_PAGES)
$(B)/man/kctrld.8: docs/operations.md debian/md2man
	@mkdir -p $(dir $@)
	$(MD2MAN) --name kctrld --section 8 --summary "Kubernetes controller daemon with C plugins" \
	  --synopsis-from "Command line" \
	  --description 'kctrld runs Kubernetes controllers whose reconcile logic lives in plugins (shared objects with a C ABI) or hooks (programs in any language, or webhooks), configured by one YAML file (kctrld.yaml(5)). Full documentation: /usr/share/doc/kctrld/.' \
	  --see-also 'kctrld.yaml(5)' --see-also 'kube-apisim(1)' --see-also 'systemd.exec(5)' \
	  docs/operations.md > $@
$(B)/man/kctrld.yaml.5: docs/config.md debian/md2man
	@mkdir -p $(dir $@)
	$(MD2MAN) --name kctrld.yaml --section 5 --summary "kctrld configuration file" \
	  --see-also 'kctrld(8)' docs/config.md > $@
$(B)/man/kube-apisim.1: docs/apisim.md debian/md2man
	@mkdir -p $(dir $@)
	$(MD2MAN) --name kube-apisim --section 1 --summary "Kubernetes API server simulator" \
	  --only "Command line" --only "What it serves" --only "Control endpoint \`/_apisim/...\`" \
	  --see-also 'kctrld(8)' docs/apisim.md > $@

$(B)/obj/tests/unit/test_plugin_sdk.o: CFLAGS += -DKC_TEST_PLUGIN_DIR=\"$(B)/tests/plugins\"
# Unit tests and benches read the fixtures (tests/fixtures/SOURCES.md) from
# KC_FIXTURES_DIR, an absolute path, so they find them from any directory.
KC_FIXTURES_DIR := $(CURDIR)/tests/fixtures
$(B)/obj/tests/unit/%.o $(B)/obj/tests/bench/%.o: CFLAGS += '-DKC_FIXTURES_DIR="$(KC_FIXTURES_DIR)"'
# Unit tests of kube-apisim components link the simulator objects they test.
APISIM_PB_OBJ := $(B)/obj/tests/apisim/protobuf.o $(B)/obj/tests/apisim/json.o $(B)/obj/tests/apisim/util.o
$(B)/tests/test_apisim_protobuf: $(APISIM_PB_OBJ)
$(B)/tests/test_apisim_fieldmgr: $(B)/obj/tests/apisim/fieldmgr.o $(B)/obj/tests/apisim/fieldset.o \
    $(B)/obj/tests/apisim/json.o $(B)/obj/tests/apisim/util.o
$(B)/tests/test_apisim_table $(B)/tests/test_apisim_fieldval $(B)/tests/test_apisim_shardsel: \
    $(filter-out $(B)/obj/tests/apisim/main.o,$(APISIM_OBJ))
$(B)/tests/test_apisim_table $(B)/tests/test_apisim_fieldval $(B)/tests/test_apisim_shardsel: \
    LDLIBS += $(APISIM_LIBS)
$(B)/tests/test_plugin_sdk: | $(UNIT_CXX_SO)

$(B)/bench/%: $(B)/obj/tests/bench/%.o $(B)/libkctrld.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Plugins: every .c in plugins/NAME/ becomes NAME.so. Position independent,
# only kctrld_plugin_entry exported (the header marks it visible).
.SECONDARY:
.DELETE_ON_ERROR:
.SECONDEXPANSION:
PCT := %
$(B)/plugins/%.so: $$(patsubst $$(PCT).c,$(B)/pic/$$(PCT).o,$$(wildcard plugins/$$*/*.c))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -o $@ $^

$(B)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $< (pic)"; $(CC) $(CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

deps:
	@bash .ci/install-deps

# What the tests run: the daemon, the simulator, the plugins, the unit tests.
test-binaries: $(B)/kctrld $(B)/kube-apisim $(PLUGIN_SO) $(UNIT_BIN) $(UNIT_CXX_SO)

# `make test` (CI): the normal build, the ASan+UBSan build of what the tests
# run, the TSan build of the thread hand-off tests (tests/run-tests
# --tsan-tests) and the fuzzers, then tests/run-tests: unit tests in the normal and ASan
# builds, those under TSan, integration tests once on the ASan build, each
# fuzzer over its stored corpus, JOBS
# at a time; it prints the closing tally.
# `make check` (the developer loop): incremental normal build, its unit tests
# and the end-to-end smoke test (tests/run-tests --check).
JOBS ?= 2
TSAN_TESTS = $(shell bash tests/run-tests --tsan-tests)
test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@$(MAKE) --no-print-directory -j$(JOBS) SAN=address test-binaries
	@$(MAKE) --no-print-directory -j$(JOBS) SAN=thread $(addprefix build-tsan/tests/,$(TSAN_TESTS))
	@$(MAKE) --no-print-directory -j$(JOBS) $(FUZZ_BIN)
	@bash tests/run-tests -j $(JOBS)

check:
	@$(MAKE) --no-print-directory -j$(JOBS) test-binaries
	@bash tests/run-tests --check -j $(JOBS)

unit: all
	@bash tests/run-tests --unit-only

# Recursive make after deps: pkg-config flags are read when make starts, so a
# fresh machine must install the libraries before the build is planned.
demo: deps
	@$(MAKE) --no-print-directory all
	@bash tests/demo.sh

# `make valgrind`: unit tests and an end-to-end run under memcheck (slow).
valgrind: deps
	@$(MAKE) --no-print-directory all
	@bash tests/valgrind.sh

# `make coverage`: gcov build in build-cov/, unit + integration tests, report.
coverage: deps
	@bash tests/coverage.sh

# `make bench` (QUICK=1: one run, 10k Pods, about three minutes): kctrld side
# by side with the peer clients of tests/bench/peers on the same kube-apisim load, the
# yajl and simulator floors, table into docs/benchmarks.md (tests/bench/compare.py).
# bench-deps installs node/npm/python3-kubernetes when missing and client-node
# once into $(B)/bench/client-node. The client-go peer is a prebuilt program
# outside the repository: PEER_CLIENT_GO=DIR (its directory, or the program);
# without it the bench runs the other clients and says so. `make bench-micro`: the bench_* binaries
# and scripts of tests/bench (tests/bench/run-bench).
QUICK ?=
PEER_CLIENT_GO ?=
bench: deps
	@$(MAKE) --no-print-directory all
	@bash tests/bench/bench-deps $(B)
	@python3 tests/bench/compare.py --build $(B) $(if $(QUICK),--quick) \
	  $(if $(PEER_CLIENT_GO),--client-go '$(PEER_CLIENT_GO)')

bench-deps:
	@bash tests/bench/bench-deps $(B)

bench-micro: deps
	@$(MAKE) --no-print-directory all
	@bash tests/bench/run-bench $(B)

# `make faults`: the fault campaign (tests/faults/run_faults.py, a table and
# TAP); `make soak`: churn and random faults on 5000 objects for SOAK_SECONDS
# (QUICK=1: 60 s) with kctrld's RSS sampled every 10 s. docs/reliability.md.
SOAK_SECONDS ?= 300
faults: deps
	@$(MAKE) --no-print-directory all
	@python3 tests/faults/run_faults.py
soak: deps
	@$(MAKE) --no-print-directory all
	@python3 tests/faults/soak.py --seconds $(if $(QUICK),60,$(SOAK_SECONDS))

FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_SECONDS ?= 20
# The daemon's sources are compiled once for every fuzzer (instrumented, not
# linked with libFuzzer's main) into build-fuzz/libkctrld.a; each target is
# its fuzz_*.c linked against that library.
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -MMD -MP -Idaemon -Iinclude $(PKG_CFLAGS) \
	-fsanitize=fuzzer-no-link,address,undefined -DKCTRLD_VERSION=\"$(VERSION)\"
FUZZ_LDFLAGS = -fsanitize=fuzzer,address,undefined
FUZZ_DAEMON_OBJ := $(DAEMON_SRC:%.c=build-fuzz/obj/%.o)
build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $< (fuzz)"; clang $(FUZZ_CFLAGS) -c $< -o $@
build-fuzz/libkctrld.a: $(FUZZ_DAEMON_OBJ)
	rm -f $@ && ar rcs $@ $^
build-fuzz/%: build-fuzz/obj/tests/fuzz/%.o build-fuzz/libkctrld.a
	clang $(FUZZ_LDFLAGS) -o $@ $^ $(LDLIBS)
# Fuzzers of kube-apisim parsers link the simulator objects instead.
build-fuzz/fuzz_apisim_protobuf: build-fuzz/obj/tests/fuzz/fuzz_apisim_protobuf.o \
    build-fuzz/obj/tests/apisim/protobuf.o build-fuzz/obj/tests/apisim/json.o build-fuzz/obj/tests/apisim/util.o
	clang $(FUZZ_LDFLAGS) -o $@ $^ $(LDLIBS)
build-fuzz/fuzz_apisim_fieldsv1: build-fuzz/obj/tests/fuzz/fuzz_apisim_fieldsv1.o build-fuzz/obj/tests/apisim/fieldmgr.o \
    build-fuzz/obj/tests/apisim/fieldset.o build-fuzz/obj/tests/apisim/json.o build-fuzz/obj/tests/apisim/util.o
	clang $(FUZZ_LDFLAGS) -o $@ $^ $(LDLIBS)
build-fuzz/fuzz_apisim_shardsel: build-fuzz/obj/tests/fuzz/fuzz_apisim_shardsel.o build-fuzz/obj/tests/apisim/shardsel.o \
    build-fuzz/obj/tests/apisim/json.o build-fuzz/obj/tests/apisim/util.o
	clang $(FUZZ_LDFLAGS) -o $@ $^ $(LDLIBS)
fuzz: deps
	@$(MAKE) --no-print-directory fuzz-run
# `make fuzz-replay`: every fuzzer built and run once over its checked-in
# corpus (tests/fuzz/corpus/NAME), no new inputs: a regression check that the
# targets still build and that no stored input crashes a parser. TAP output.
fuzz-replay: $(FUZZ_BIN)
	@bash tests/fuzz/replay $(FUZZ_BIN)
fuzz-run: $(FUZZ_BIN)
	@set -e; for f in $(FUZZ_BIN); do \
	  n=$$(basename $$f); mkdir -p build-fuzz/corpus-$$n; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 build-fuzz/corpus-$$n tests/fuzz/corpus/$$n 2>&1 | tail -2; \
	done

# Plugin paths in the example configs: the build tree's (../build/plugins)
# and the packaged default (/usr/lib/kctrld/plugins) become the installed one;
# so does their config schema (yaml-language-server's `$schema=` line).
INSTALL_PLUGIN_SED = s|\.\./build/plugins/|$(PREFIX)/lib/kctrld/plugins/|g; s|/usr/lib/kctrld/plugins/|$(PREFIX)/lib/kctrld/plugins/|g; \
  s|\$$schema=\.\./docs/kctrld\.schema\.json|$$schema=$(PREFIX)/share/kctrld/kctrld.schema.json|; \
  s|\$$schema=/usr/share/kctrld/|$$schema=$(PREFIX)/share/kctrld/|

install: $(B)/kctrld $(PLUGIN_SO) $(MAN_PAGES)
	install -d $(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(PREFIX)/share/man/man5 \
	  $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0644 $(B)/man/kctrld.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0644 $(B)/man/kctrld.yaml.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 $(B)/man/kube-apisim.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/kctrld \
	  $(DESTDIR)$(PREFIX)/lib/kctrld/plugins $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/kctrld/examples $(DESTDIR)$(PREFIX)/lib/systemd/system
	install -d -m 0750 $(DESTDIR)/etc/kctrld
	@# The group exists once systemd-sysusers ran (kctrld.sysusers.conf, installed below).
	@if getent group kctrld >/dev/null 2>&1; then \
	  echo "chgrp kctrld $(DESTDIR)/etc/kctrld"; chgrp kctrld $(DESTDIR)/etc/kctrld; \
	else \
	  echo "install: group kctrld does not exist (yet): $(DESTDIR)/etc/kctrld stays group root;" \
	       "after systemd-sysusers created it: chgrp kctrld /etc/kctrld"; \
	fi
	install -m 0755 $(B)/kctrld $(DESTDIR)$(PREFIX)/bin/kctrld
	install -m 0644 include/kctrld/*.h $(DESTDIR)$(PREFIX)/include/kctrld/
	install -m 0644 docs/kctrld.schema.json $(DESTDIR)$(PREFIX)/share/kctrld/
	install -d $(DESTDIR)$(PREFIX)/share/kctrld/python $(DESTDIR)$(PREFIX)/share/kctrld/systemd
	install -m 0644 docs/hook-v1.schema.json plugins/hooks/helpers/hook.sh $(DESTDIR)$(PREFIX)/share/kctrld/
	install -m 0644 plugins/hooks/helpers/kctrld_hook.py $(DESTDIR)$(PREFIX)/share/kctrld/python/
	install -m 0644 systemd/jit-hooks.conf $(DESTDIR)$(PREFIX)/share/kctrld/systemd/
	$(if $(PLUGIN_SO),install -m 0644 $(PLUGIN_SO) $(DESTDIR)$(PREFIX)/lib/kctrld/plugins/)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' config/kctrld-plugin.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/kctrld-plugin.pc
	@# Example configs name the installed plugin directory, not the build tree.
	@for f in config/*.yaml; do \
	  echo "install $$f -> $(DESTDIR)$(PREFIX)/share/kctrld/examples/ (plugins: $(PREFIX)/lib/kctrld/plugins)"; \
	  sed -e '$(INSTALL_PLUGIN_SED)' $$f > $(DESTDIR)$(PREFIX)/share/kctrld/examples/$$(basename $$f) && \
	  chmod 0644 $(DESTDIR)$(PREFIX)/share/kctrld/examples/$$(basename $$f) || exit 1; \
	done
	sed -e 's|@PREFIX@|$(PREFIX)|g' systemd/kctrld.service.in \
	  > $(DESTDIR)$(PREFIX)/lib/systemd/system/kctrld.service
	install -d $(DESTDIR)$(PREFIX)/lib/sysusers.d $(DESTDIR)$(PREFIX)/share/doc/kctrld
	install -m 0644 systemd/kctrld.sysusers.conf $(DESTDIR)$(PREFIX)/lib/sysusers.d/kctrld.conf
	install -m 0644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/kctrld/
	test -e $(DESTDIR)/etc/kctrld/kctrld.yaml || \
	  install -m 0640 $(DESTDIR)$(PREFIX)/share/kctrld/examples/kctrld.example.yaml \
	    $(DESTDIR)/etc/kctrld/kctrld.yaml

# What is installed or packaged: the daemon, the simulator and the plugins.
binaries: $(B)/kctrld $(B)/kube-apisim $(PLUGIN_SO)

# `make deb`: kctrld_<version>_<arch>.deb, kctrld-dev_<version>_all.deb and
# kube-apisim_<version>_<arch>.deb in build/deb/ (debian/, docs/deploy.md).
# dpkg-buildpackage writes next to the source tree, so it builds a copy in
# build/deb/src. `make deb-deps` installs what it needs beyond `make deps`.
DEB_TREE := Makefile README.md LICENSE daemon include plugins config systemd docs debian
deb:
	rm -rf build/deb && mkdir -p build/deb/src/tests
	cp -a $(DEB_TREE) build/deb/src/
	cp -a tests/apisim build/deb/src/tests/
	cd build/deb/src && dpkg-buildpackage -b -us -uc
	@ls build/deb/*.deb
deb-deps: deps
	@if [ "$$(id -u)" -ne 0 ]; then echo "run as root: apt-get install -y --no-install-recommends dpkg-dev debhelper lintian python3" >&2; exit 1; fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev debhelper lintian python3 >&2

FORMAT_SRC = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_SRC)

# `make lint`: the layering check (daemon/LAYERS, tests/lint/check_layers.py),
# the size check (no daemon/ file over 1200 lines, no function over 150:
# tests/lint/check_sizes.py), then cppcheck, which fails fast on the bugs it knows.
lint:
	python3 tests/lint/check_layers.py
	python3 tests/lint/check_sizes.py
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
	  --suppress=missingIncludeSystem -D__GNUC__ -Idaemon -Iinclude daemon tests/apisim plugins

clean:
	rm -rf build build-asan build-tsan build-fuzz build-cov

-include $(shell find build build-asan build-tsan build-cov build-fuzz -path build/deb -prune -o -name '*.d' -type f -print 2>/dev/null)
