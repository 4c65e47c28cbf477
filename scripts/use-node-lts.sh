#!/usr/bin/env bash
# Sourced by scripts/test.sh: runs the tests on the Node.js line the image ships (.node-version).
# When the machine's node is of an older major, the official binary of that exact version is
# taken from the npm registry (the package node-linux-<arch>), unpacked once into a cache and put
# first in PATH. A newer or equal major on the machine is used as it is.
want=$(tr -d ' \n' < "$(dirname "${BASH_SOURCE[0]}")/../.node-version")
want_major=${want%%.*}
have_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$have_major" -lt "$want_major" ]; then
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "Node.js $want is needed (this machine has ${have_major:-none}); install it from https://nodejs.org/" >&2; exit 1 ;;
  esac
  cache="${FLOODGATE_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}/node-v$want-linux-$arch"
  if [ ! -x "$cache/bin/node" ]; then
    echo "Node.js $want is what floodgate supports; this machine has $have_major: fetching node-linux-$arch@$want from the npm registry into $cache" >&2
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "node-linux-$arch@$want" >/dev/null) || { echo "could not fetch node-linux-$arch@$want; install Node.js $want from https://nodejs.org/" >&2; rm -rf "$tmp"; exit 1; }
    mkdir -p "$tmp/unpacked" && tar -xzf "$tmp"/node-linux-"$arch"-*.tgz -C "$tmp/unpacked"
    mkdir -p "$(dirname "$cache")" && rm -rf "$cache" && mv "$tmp/unpacked/package" "$cache"
    rm -rf "$tmp"
  fi
  export PATH="$cache/bin:$PATH"
fi
echo "tests run on Node.js $(node --version)" >&2
