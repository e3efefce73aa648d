#!/usr/bin/env bash
# Installs every Debian package kope's build, tests and runtime need, and the npm packages of the
# MCP tests (tests/mcp: `npm ci`, so the tests run offline afterwards). Idempotent: packages
# already present are skipped, and `apt-get update` runs only when something is missing.
set -euo pipefail

packages=(
  # toolchain
  build-essential g++ cmake ninja-build pkg-config binutils git
  # libraries
  libfmt-dev libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libsqlite3-dev sqlite3
  libpq-dev postgresql
  libcurl4-openssl-dev libssl-dev libzstd-dev libseccomp-dev
  # `kope mcp --http` (Streamable HTTP)
  libcpp-httplib-dev
  # vendor-library baselines
  libdnnl-dev libopenblas-dev
  # the sandbox
  bubblewrap
  # PyTorch references (reference.py) and `kope ops import kernelbench`: Debian's torch, and
  # libpython to embed it in the trusted runner
  python3-torch libpython3-dev
  # OpenCL on the CPU
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev python3
  # reports (graphviz renders memory graphs; chromium opens the HTML report in the browser test)
  graphviz chromium
  # a single-node Slurm for the tests of `kope run --executor slurm` (scripts/services/slurm.sh)
  slurmctld slurmd slurm-client munge
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# node and npm for the MCP tests (tests/mcp): Debian's, unless a node with npm is installed
# already (e.g. NodeSource's nodejs, which bundles npm and conflicts with Debian's npm package).
if ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
    echo "setup: missing packages (${missing[*]}) and not root; install them or run as root" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The MCP tests need node 20 or newer (the conformance suite's dependencies do; Debian 12's nodejs
# is 18): an older one gets node 20 from the npm registry, as the `node` package.
node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if [ "$node_major" -lt 20 ]; then
  echo "setup: node $node_major is too old for the MCP tests; installing node 20 with npm (the node package)"
  $SUDO npm install --global --no-audit --no-fund node@20
  hash -r
  node_major="$(node -p 'process.versions.node.split(".")[0]')"
  [ "$node_major" -ge 20 ] || { echo "setup: node is still $node_major; put npm's global bin first in PATH" >&2; exit 1; }
fi

# The MCP tests' npm packages (the MCP SDK, the conformance suite), exactly as locked.
mcp_tests="$(cd "$(dirname "$0")/.." && pwd)/tests/mcp"
if [ ! -d "$mcp_tests/node_modules" ] || [ "$mcp_tests/package-lock.json" -nt "$mcp_tests/node_modules" ]; then
  echo "setup: npm ci in $mcp_tests"
  (cd "$mcp_tests" && npm ci --no-audit --no-fund && touch node_modules)
fi
