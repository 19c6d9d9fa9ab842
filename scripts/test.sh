#!/usr/bin/env bash
# Runs every test (busted specs, C API tests, functional CLI checks) and ends
# with one line "N passed, N failed" counting all of them.
# Environment: BUILD (default build), LUDO_ASAN=1 to run under ASan/UBSan.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
passed=0
failed=0
status=0

add() { passed=$((passed + $1)); failed=$((failed + $2)); }

preload=""
if [ "${LUDO_ASAN:-0}" = 1 ]; then
  preload="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Lua runs instrumented too: the fault-injection sweeps take ~20 s alone.
  export LUDO_CTEST_TIMEOUT=${LUDO_CTEST_TIMEOUT:-90}
fi

# 1. busted (Lua 5.4): unit, rubrics, functional and ludo.llm specs, on
# $BUILD/lua (the patched Lua the programs link, so the sessions the specs
# open share prototypes as the programs' do); then the specs of ludo.host
# once more on the stock lua5.4, where libludo.so loads bytecode instead.
# run_busted LUA SPEC...: runs busted, adds its counts.
run_busted() {
  local lua=$1 out rc line s f e
  shift
  out=$(mktemp)
  # spec/llm runs ludo.llm against the mock LLM server (node); the API key
  # its specs check for leaks comes from LUDO_TEST_LLM_KEY.
  LUDO_BUILD=$BUILD LD_PRELOAD="$preload" LUDO_LUA="$lua" \
    LUDO_TEST_LLM_KEY=sk-test-key-7f3a9c01 \
    busted --lua="$lua" --cpath="$BUILD/cmod/?.so" -o utfTerminal "$@" \
    >"$out" 2>&1
  rc=$?
  tail -n 40 "$out"
  line=$(grep -E '[0-9]+ success(es)? / [0-9]+ failures? / [0-9]+ errors?' "$out" | tail -n 1)
  if [ -n "$line" ]; then
    s=$(echo "$line" | grep -oE '[0-9]+ success' | grep -oE '[0-9]+')
    f=$(echo "$line" | grep -oE '[0-9]+ failure' | grep -oE '[0-9]+')
    e=$(echo "$line" | grep -oE '[0-9]+ error' | grep -oE '[0-9]+')
    add "$s" $((f + e))
  else
    echo "busted produced no summary (exit $rc)"
    add 0 1
  fi
  [ $rc -eq 0 ] || status=1
  rm -f "$out"
}
echo "== busted"
run_busted "$BUILD/lua" spec/unit spec/rubrics spec/functional spec/llm
echo "== busted on the stock lua5.4 (ludo.host without shared prototypes)"
run_busted lua5.4 spec/functional/env_api_spec.lua \
  spec/functional/sandbox_spec.lua

# 2. C API tests (with leak checking under ASan).
echo "== C tests"
if [ "${LUDO_ASAN:-0}" = 1 ]; then
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
fi
out=$(mktemp)
"$BUILD/ludo-ctest" >"$out" 2>&1
rc=$?
cat "$out"
line=$(grep -E '^ctest: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
if [ -n "$line" ]; then
  add "$(echo "$line" | awk '{print $2}')" "$(echo "$line" | awk '{print $4}')"
else
  echo "ludo-ctest produced no summary (exit $rc)"
  add 0 1
fi
[ $rc -eq 0 ] || status=1
rm -f "$out"

# 3. Functional checks of the binaries.
echo "== CLI and examples"
check() {
  local name=$1; shift
  if "$@" >/tmp/ludo-check.out 2>&1; then
    echo "ok $name"; add 1 0
  else
    echo "FAIL $name"; sed 's/^/    /' /tmp/ludo-check.out | tail -n 20
    add 0 1; status=1
  fi
}
expect_exit() {
  local name=$1 want=$2; shift 2
  "$@" >/tmp/ludo-check.out 2>&1
  local got=$?
  if [ "$got" = "$want" ]; then
    echo "ok $name"; add 1 0
  else
    echo "FAIL $name (exit $got, want $want)"; add 0 1; status=1
  fi
}
# The profile-guided build (Makefile, PGO): GCC finds each object's
# profile by the object's path below the tree and, finding none, compiles
# without one in silence. So: the final pass used a profile, and the
# training run wrote one under the name of each object on a step's path.
pgo_profiles() {
  local d=$BUILD/pgo/data o
  grep -q -- '-fprofile-use=' "$BUILD/cflags.txt" || {
    echo "$BUILD was not compiled with the profile"; return 1; }
  for o in "$BUILD"/obj/runtime/script/state "$BUILD"/obj/runtime/env/result \
      "$BUILD"/obj/runtime/script/sched "$BUILD"/obj/runtime/script/json \
      "$BUILD"/obj/runtime/base/jsonparse build-lua/src/lvm \
      build-lua/src/ldo build-lua/src/ltable; do
    [ -s "$d/$(echo "$o" | tr / '#').gcda" ] || {
      echo "no profile for $o.o in $d"; return 1; }
  done
}
if [ -f "$BUILD/pgo/trained" ]; then
  check "the build is profile-guided (the step path's objects have a profile)" \
    pgo_profiles
fi
check "ludo run echo" "$BUILD/ludo" run examples/echo --episodes 2 --seed 3 \
  --max-steps 5
check "ludo run --json is one object per episode" bash -c \
  "'$BUILD/ludo' run examples/echo --episodes 3 --seed 1 --json \
   | lua5.4 -e 'local n=0 for l in io.lines() do n=n+1 assert(l:match(\"^{.*\\\"episode\\\":\"..n..\",\")) end assert(n==3)'"
check "ludo run is deterministic with --seed" bash -c \
  "a=\$('$BUILD/ludo' run examples/echo --episodes 2 --seed 9 --json | sed 's/\"session\":\"[^\"]*\"//'); \
   b=\$('$BUILD/ludo' run examples/echo --episodes 2 --seed 9 --json | sed 's/\"session\":\"[^\"]*\"//'); \
   [ \"\$a\" = \"\$b\" ]"
check "ludo run with a policy file" bash -c \
  "'$BUILD/ludo' run examples/echo --episodes 1 --max-steps 3 \
   --policy examples/echo/policy.lua | grep -q 'total reward 1.92'"
check "ludo run arith: tasks drawn from the seed, answered by its policy" \
  bash -c "'$BUILD/ludo' run examples/arith --episodes 4 --seed 2 \
   --policy examples/arith/policy.lua | grep -q '0 failed, mean reward 1$'"
expect_exit "a policy giving bad actions fails the episode" 1 \
  "$BUILD/ludo" run examples/echo --max-steps 2 \
  --policy spec/fixtures/cli/bad_policy.lua
expect_exit "a policy spinning at its top level ends with its budget" 1 \
  timeout 20 "$BUILD/ludo" run examples/echo --cpu-budget 200 \
  --policy spec/fixtures/cli/spin_policy.lua
check "the spinning policy's error names ETIMEOUT" bash -c \
  "'$BUILD/ludo' run examples/echo --cpu-budget 200 \
   --policy spec/fixtures/cli/spin_policy.lua 2>&1 | grep -q ETIMEOUT"
check "runtime layering (scripts/check-layers.sh)" scripts/check-layers.sh
check "luacheck: no warnings in lua/ rubrics/ examples/ spec/" \
  luacheck --quiet lua rubrics examples spec
check "ludo run --trace writes a JSON line per reset and step" bash -c \
  "'$BUILD/ludo' run examples/echo --episodes 2 --seed 4 --max-steps 3 \
     --trace - >/tmp/ludo-trace.out && \
   lua5.4 -e 'local n=0 for l in io.lines(\"/tmp/ludo-trace.out\") do \
     if l:match(\"^{.episode.:\") then n=n+1 \
     assert(l:match(\"\\\"observation\\\":\")) end end assert(n==8, n)'"
check "ludo run -v shows print output, named by episode and session" \
  bash -c "'$BUILD/ludo' run spec/fixtures/cli/printer -v 2>&1 \
   | grep -q '^\[episode 1 session [0-9a-f]*\] hello from step$'"
check "ludo run leaves failed episodes out of the mean and says why" \
  bash -c "'$BUILD/ludo' run examples/echo --max-steps 2 \
   --policy spec/fixtures/cli/bad_policy.lua 2>/dev/null \
   | grep -q 'FAILED after 0 steps: ESCHEMA' && \
   '$BUILD/ludo' run examples/echo --max-steps 2 \
   --policy spec/fixtures/cli/bad_policy.lua 2>/dev/null | grep -q '1 failed'"
check "ludo run --json writes floats in their shortest form" bash -c \
  "'$BUILD/ludo' run examples/echo --seed 1 --max-steps 3 --json \
   | grep -q '\"total_reward\":2.16,'"
check "ludo run: an environment's error names its file:line, the \
library's frames theirs" bash -c \
  "'$BUILD/ludo' run spec/fixtures/c/where --max-steps 2 \
   --policy spec/fixtures/cli/where_raise_policy.lua >/tmp/ludo-where.out 2>&1; \
   grep -q 'ESCRIPT: the root rubric (Probe): spec/fixtures/c/where/env.lua:13: raised on purpose' \
     /tmp/ludo-where.out && \
   grep -q 'lua/ludo/rubric.lua:[0-9][0-9]*: in ' /tmp/ludo-where.out && \
   ! grep -q '?:-1' /tmp/ludo-where.out"
check "ludo run: a policy's error names its file:line" bash -c \
  "'$BUILD/ludo' run spec/fixtures/c/where --max-steps 2 \
   --policy spec/fixtures/cli/raising_policy.lua 2>&1 | grep -q \
   'ESCRIPT: spec/fixtures/cli/raising_policy.lua:4: this policy cannot'"
check "ludo run: ETIMEOUT names the phase and the line" bash -c \
  "'$BUILD/ludo' run spec/fixtures/c/where --max-steps 2 --cpu-budget 100 \
   --policy spec/fixtures/cli/where_spin_policy.lua 2>&1 | grep -qF \
   'ETIMEOUT: the call exceeded its CPU budget of 100 ms (at spec/fixtures/c/where/env.lua:6) during the rubric of step'"
check "ludo run: LUDO_DEBUG=0 drops the library's lines, 1 keeps names" \
  bash -c "LUDO_DEBUG=0 '$BUILD/ludo' run spec/fixtures/c/where \
   --max-steps 2 --policy spec/fixtures/cli/where_raise_policy.lua 2>&1 \
   | grep -q 'env.lua:13: raised' && ! LUDO_DEBUG=0 '$BUILD/ludo' run \
   spec/fixtures/c/where --max-steps 2 \
   --policy spec/fixtures/cli/where_raise_policy.lua 2>&1 \
   | grep -q 'lua/ludo/rubric.lua:[0-9]' && LUDO_DEBUG=1 '$BUILD/ludo' run \
   spec/fixtures/c/where --max-steps 2 \
   --policy spec/fixtures/cli/where_raise_policy.lua 2>&1 \
   | grep -q \"in upvalue 'error'\""
check "ludo --version" "$BUILD/ludo" --version
check "ludo run --help" "$BUILD/ludo" run --help
expect_exit "bad option exits 2" 2 "$BUILD/ludo" run examples/echo --bogus
expect_exit "bad number exits 2" 2 "$BUILD/ludo" run examples/echo --episodes x
expect_exit "no command exits 2" 2 "$BUILD/ludo"
expect_exit "missing env exits 1" 1 "$BUILD/ludo" run /nonexistent/env
check "ludo run from another directory (embedded modules)" bash -c \
  "cd /tmp && LUDO_PATH= '$PWD/$BUILD/ludo' run '$PWD/examples/echo' --episodes 1"
check "lua-path lets stock lua5.4 require ludo.rubrics" bash -c \
  "eval \"\$('$BUILD/ludo' lua-path)\" && cd /tmp && \
   lua5.4 -e 'local R=require(\"ludo.rubrics\") assert(R.WeightedSum)'"
check "hostloop example (ludo on the host's libuv loop)" "$BUILD/hostloop"
if [ -x "$BUILD/gridworld" ] && [ -s "$BUILD/gridworld" ]; then
  check "gridworld example" "$BUILD/gridworld"
fi
# The tutorial's files and commands (docs/tutorial.md): one line each.
out=$(mktemp)
lua5.4 scripts/test-tutorial.lua "$BUILD" >"$out" 2>&1
cat "$out"
add "$(grep -c '^ok ' "$out")" "$(grep -c '^FAIL ' "$out")"
if grep -q '^FAIL ' "$out" || ! grep -q '^ok ' "$out"; then
  status=1
  grep -q '^ok \|^FAIL ' "$out" || add 0 1
fi
rm -f "$out"
for ex in examples/rubrics/*.lua; do
  check "example $ex" env LUA_PATH="lua/?.lua;lua/?/init.lua;./?.lua;;" \
    LUA_CPATH="$BUILD/cmod/?.so;;" LD_PRELOAD="$preload" \
    lua5.4 "$ex"
done

# A suite that prints "ok NAME" / "FAIL NAME" per test: runs `$@`,
# counts its lines, and counts one failure more when it ended badly
# without saying which test failed.
suite() {
  local what=$1 out rc
  shift
  out=$(mktemp)
  "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  add "$(grep -c '^ok ' "$out")" "$(grep -c '^FAIL ' "$out")"
  if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$out"; then
    echo "FAIL $what ended with status $rc"; add 0 1
  fi
  [ $rc -eq 0 ] || status=1
  rm -f "$out"
}

# 3b. The server, spoken to by an independent client (Debian's Python
# and websockets): every route, frame type and error code, MCP, capacity,
# idle timeout, production mode, auth, pings, graceful shutdown.
echo "== serve"
suite "serve tests" timeout 600 /usr/bin/python3 spec/serve/serve_test.py \
  "$BUILD/ludo"

# 3c. The server against the official MCP TypeScript SDK (npm, installed
# by scripts/deps.sh).
echo "== serve: MCP SDK client"
if [ -d spec/serve/node_modules/@modelcontextprotocol/sdk ]; then
  suite "MCP SDK tests" timeout 300 node spec/serve/mcp_sdk_test.mjs \
    "$BUILD/ludo"
else
  echo "FAIL mcp_sdk: spec/serve/node_modules missing (run scripts/deps.sh)"
  add 0 1
  status=1
fi

# 3c'. `ludo eval` through the binary (spec/eval/eval_test.py): output
# folder, determinism, resume after kill -9, shards and merge, Ctrl-C,
# progress, run files, a remote run.
echo "== eval"
suite "eval tests" timeout 600 /usr/bin/python3 spec/eval/eval_test.py \
  "$BUILD/ludo"

# 3d. The Kubernetes manifests of docs/k8s/ (docs/deploy.md): parsed, cross-
# checked, and the Deployment's arguments run with the real binary.
echo "== k8s manifests"
suite "k8s manifest checks" timeout 120 /usr/bin/python3 \
  spec/serve/k8s_test.py "$BUILD/ludo"

# 3e. The report of `ludo eval` (ludo.eval.report) in headless Chromium:
# the charts rendered, no console error, no request but the page.
echo "== eval report in Chromium"
suite "eval report test" env LUDO_PRELOAD="$preload" timeout 120 \
  /usr/bin/python3 spec/report/report_test.py "$BUILD"

# 4. Lifecycle tests under valgrind memcheck, which also sees libuv's own
# accesses (not instrumented by ASan).
if [ "${LUDO_ASAN:-0}" != 1 ] && command -v valgrind >/dev/null 2>&1; then
  echo "== valgrind"
  for t in echo_reset_step_state core_borrowed_loop \
           core_free_with_pending_lifecycle async_runtime_free_in_flight \
           reenter_close_self batch_async alloc_fault_injection \
           http_abort_pending ws_upgrade_pipelined net_socket_ws_echo \
           net_socket_server_close client_calls client_reconnect \
           client_close_in_flight; do
    check "valgrind: $t" env LUDO_CTEST_TIMEOUT=300 valgrind --quiet \
      --trace-children=yes --leak-check=full \
      --errors-for-leak-kinds=definite --error-exitcode=99 \
      "$BUILD/ludo-ctest" "$t"
  done
fi

# 5. Installation into a temporary prefix, used as a user would.
if [ "${LUDO_ASAN:-0}" != 1 ]; then
  echo "== install"
  out=$(mktemp)
  BUILD=$BUILD scripts/test-install.sh >"$out" 2>&1
  cat "$out"
  add "$(grep -c '^ok ' "$out")" "$(grep -c '^FAIL ' "$out")"
  grep -q '^FAIL ' "$out" && status=1
  rm -f "$out"
fi

# 6. A short run of each fuzz target (clang's libFuzzer, ASan+UBSan), in
# the release run only.
if [ "${LUDO_ASAN:-0}" != 1 ] && command -v clang >/dev/null 2>&1; then
  echo "== fuzz smoke"
  if make --no-print-directory fuzz-build >/tmp/ludo-fuzz-build.out 2>&1; then
    for t in json schema step re pattern net client; do
      check "fuzz_$t runs 5 s without a crash" make --no-print-directory \
        fuzz FUZZ_NAMES=$t FUZZ_SECONDS=5
    done
  else
    echo "FAIL fuzz build"; tail -n 20 /tmp/ludo-fuzz-build.out
    add 0 1; status=1
  fi
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || status=1
exit $status
