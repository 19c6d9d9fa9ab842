#!/usr/bin/env bash
# Installs the Debian packages ludo needs to build, test and run, when missing.
# Safe to run repeatedly: does nothing when everything is present.
set -eu

# Exactly what the build and the tests use: the C toolchain, Lua 5.4 with
# busted and luacheck, libuv, jansson (schemas), pcre2 (ludo.re),
# http-parser and wslay (runtime/net: HTTP/1.1 parsing, WebSocket framing),
# nettle (SHA-1 and base64 of the WebSocket handshake), and clang with its
# sanitizer and libFuzzer runtimes (make fuzz, the fuzz smoke of make
# test), valgrind (lifecycle tests under memcheck), and Debian's Python
# with websockets (an independent client for the functional tests of
# `ludo serve`, spec/serve/) and yaml (parses the Kubernetes manifests of
# docs/k8s/ in spec/serve/k8s_test.py). libcurl4-openssl-dev: the HTTP
# client of ludo.llm (runtime/net/curlm.c, curl_multi on the loop); nodejs:
# the mock LLM server of the tests and bench-llm (spec/llm/mock_llm.js).
# chromium: the headless browser that loads the report of `ludo eval` and
# checks that its charts render (spec/report/report_test.py).
PKGS="build-essential dpkg-dev pkg-config liblua5.4-dev lua5.4 libuv1-dev libjansson-dev
libpcre2-dev libhttp-parser-dev libwslay-dev nettle-dev lua-busted lua-check clang
libclang-rt-dev valgrind python3 python3-websockets python3-yaml
libcurl4-openssl-dev nodejs chromium"

SUDO=""
if [ "$(id -u)" != 0 ]; then
  SUDO="sudo"
fi

# ludo's programs link a Lua built from Debian's lua5.4 source package with
# ludo's patches (scripts/lua-build.sh), so apt needs Debian's source
# index too.
SRC_LIST=/etc/apt/sources.list.d/ludo-deb-src.sources
need_update=""
if ! grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list \
     /etc/apt/sources.list.d/ 2>/dev/null; then
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  $SUDO tee "$SRC_LIST" >/dev/null <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  need_update=1
fi

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

export DEBIAN_FRONTEND=noninteractive
if [ -z "$missing" ]; then
  if [ -n "$need_update" ]; then $SUDO apt-get update -qq; fi
else
  echo "deps: installing:$missing" >&2
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
  echo "deps: done" >&2
fi

# The official MCP TypeScript SDK, an independent MCP client for the tests
# of `ludo serve` (spec/serve/mcp_sdk_test.mjs), from the npm registry with
# the machine's Node.js, pinned by spec/serve/package-lock.json.
root=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -d "$root/spec/serve/node_modules/@modelcontextprotocol/sdk" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "deps: installing nodejs npm" >&2
    $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  echo "deps: npm ci in spec/serve" >&2
  (cd "$root/spec/serve" && npm ci --no-audit --no-fund --silent) ||
    echo "deps: npm ci failed; the MCP SDK test will fail" >&2
fi
