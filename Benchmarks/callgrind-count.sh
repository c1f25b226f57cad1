# Sourced by the instruction-count scripts: `callgrind_prepare PRODUCT` builds the product in
# release (with $SWIFT_FLAGS) in the current folder and keeps a stripped copy (valgrind cannot
# read the DWARF the toolchain emits); then `count WORKLOAD N` prints the instructions callgrind
# counted for one run of it.
callgrind_prepare() {
    # shellcheck disable=SC2086
    swift build -c release --product "$1" ${SWIFT_FLAGS:-} >/dev/null
    binary=$(mktemp)
    trap 'rm -f "$binary"' EXIT
    cp ".build/release/$1" "$binary"
    strip --strip-debug "$binary"
    chmod +x "$binary"
}

count() {
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$binary" "$1" "$2" >/dev/null 2>&1
    awk '/^summary:/ { print $2 }' "$out"
    rm -f "$out"
}
