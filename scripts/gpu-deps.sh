#!/usr/bin/env bash
# Gathers the header-only libraries that the CUDA tests and bench/attention build needs into one
# folder, on a Debian/Ubuntu machine and without installing anything: the -dev packages are
# downloaded with `apt-get download` and unpacked with `dpkg -x`. The folder can then be copied
# to a GPU machine that lacks them and handed to scripts/gpu-check.sh --deps DIR.
#
#   scripts/gpu-deps.sh DIR            doctest, nlohmann-json, xsimd, Eigen, CLI11 into DIR/usr
#   scripts/gpu-deps.sh --help
#
# What goes in: the headers and CMake package files of doctest-dev, nlohmann-json3-dev,
# libxsimd-dev, libeigen3-dev (without unsupported/, which sinklab does not include) and
# libcli11-dev (only the examples use it; 0.4 MB). Documentation and pkg-config files are left
# out. Package files that name /usr as their prefix are rewritten to find their headers next to
# themselves, so DIR works wherever it is copied. DIR/sinklab-deps.txt lists the versions.
set -euo pipefail

packages=(doctest-dev nlohmann-json3-dev libxsimd-dev libeigen3-dev libcli11-dev)

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

if [[ $# -ne 1 || "$1" == -* ]]; then
  [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]] && { usage; exit 0; }
  usage >&2
  exit 2
fi
dir="$1"

for tool in apt-get dpkg-deb; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "gpu-deps.sh: '$tool' not found; this script runs on Debian or Ubuntu (the folder it makes" >&2
    echo "gpu-deps.sh: can then be copied to any x86-64 Linux machine)" >&2
    exit 1
  fi
done
if [[ -e "$dir" && -n "$(ls -A "$dir" 2>/dev/null)" && ! -f "$dir/sinklab-deps.txt" ]]; then
  echo "gpu-deps.sh: '$dir' exists, is not empty and was not made by this script; choose another folder" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# apt-get download drops root to the _apt user, which must be able to write here.
chmod 0777 "$work"

echo "gpu-deps.sh: downloading ${packages[*]}"
(cd "$work" && apt-get download -q "${packages[@]}") || true  # a missing package is named below
for pkg in "${packages[@]}"; do
  if ! compgen -G "$work/${pkg}_*.deb" >/dev/null; then
    echo "gpu-deps.sh: 'apt-get download $pkg' gave no package (see the message above; is 'apt-get update'" >&2
    echo "gpu-deps.sh: needed, or does this release name the package differently? apt-cache search helps)" >&2
    exit 1
  fi
done

rm -rf "$dir"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
: > "$dir/sinklab-deps.txt.tmp"
for deb in "$work"/*.deb; do
  dpkg-deb -x "$deb" "$dir"
  dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >> "$dir/sinklab-deps.txt.tmp"
done

# Not needed to build: documentation, pkg-config files, Eigen's unsupported modules, and
# xsimd's CMake package (sinklab takes only xsimd's include folder: Debian's xsimd target links
# an 'xtl' library that is not there).
rm -rf "$dir/usr/share/doc" "$dir/usr/share/pkgconfig" "$dir/usr/lib/x86_64-linux-gnu" \
  "$dir/usr/include/eigen3/unsupported"

# A package file generated with a fixed prefix (doctest's: set(_IMPORT_PREFIX "/usr")) would
# point at /usr/include on the GPU machine: make it relative to the file's own folder.
while IFS= read -r -d '' f; do
  rel="${f#"$dir"/usr/}"
  up="$(dirname "$rel" | sed 's|[^/][^/]*|..|g')"
  sed -i "s|^set(_IMPORT_PREFIX \"/usr\")\$|get_filename_component(_IMPORT_PREFIX \"\${CMAKE_CURRENT_LIST_DIR}/$up\" ABSOLUTE)|" "$f"
done < <(find "$dir/usr" -name '*.cmake' -print0)
if grep -rlE '"/usr(/|")' --include='*.cmake' "$dir" >/dev/null; then
  echo "gpu-deps.sh: these package files still name /usr; the folder would not work elsewhere:" >&2
  grep -rnE '"/usr(/|")' --include='*.cmake' "$dir" >&2
  exit 1
fi

{
  echo "# Made by scripts/gpu-deps.sh on $(date -u +%Y-%m-%d) from $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "# Use: scripts/gpu-check.sh --deps <this folder>  (CMake: CMAKE_PREFIX_PATH=<this folder>/usr)"
  sort "$dir/sinklab-deps.txt.tmp"
} > "$dir/sinklab-deps.txt"
rm -f "$dir/sinklab-deps.txt.tmp"

echo "gpu-deps.sh: $(du -sh "$dir" | cut -f1) in $dir:"
sed -n '3,$p' "$dir/sinklab-deps.txt" | sed 's/^/  /'
