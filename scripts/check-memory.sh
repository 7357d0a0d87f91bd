#!/bin/sh
# make check-memory: runs C test programs and the C examples under valgrind, every rank, through
# our mpirun (`mpirun -n N valgrind --error-exitcode=99 prog`). Needs the build tree (`make`);
# installs valgrind with apt-get when it is missing and we are root, else says what to install.
# A program fails when valgrind reports an error (invalid read or write, use of uninitialized
# memory in a branch or system call, bad free, definite leak: exit code 99) or the job fails.
# Logs: build/check-memory/<program>.log (one valgrind log per rank: <program>.<pid>.vg).
# Then the Rust tests of the unsafe datatype, engine and ring code under valgrind (Miri's stand-in;
# logs build/check-memory/rust-<crate>.log).
#
#   NP=2 PROGS="p2p/basic coll/basic" sh scripts/check-memory.sh
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
NP=${NP:-2}
# Programs meant to pass (the error, fatal-error and abort tests end jobs on purpose; the
# thread and stress tests take too long under valgrind).
PROGS=${PROGS:-"p2p/basic p2p/sendmodes p2p/probe p2p/persistent p2p/completion p2p/sendrecv
p2p/status p2p/ordering p2p/truncate p2p/selfsend p2p/bsend p2p/datatypes coll/basic
coll/nonblocking coll/ops coll/comm dt/constructors dt/pack dt/decode dt/bottom
rma/fence rma/passive rma/pscw rma/shared ext/isendrecv ext/grequest ext/buffers ext/madeleine
examples/hello examples/ring examples/pingpong examples/probe examples/nonblocking"}

if ! command -v valgrind >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "check-memory: installing valgrind"
        apt-get update -qq >/dev/null 2>&1
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null 2>&1
    fi
    command -v valgrind >/dev/null 2>&1 || {
        echo "check-memory: valgrind is missing (apt-get install valgrind)" >&2
        exit 2
    }
fi
for f in bin/mpicc bin/mpirun lib/libmadmpi.so; do
    [ -e "$root/$f" ] || { echo "check-memory: $f is missing: run make first" >&2; exit 2; }
done

# From 128 KiB a rank receiving over shared memory asks the sender to write part of the message
# into its buffer with process_vm_writev (the split copy): valgrind in the receiving process
# cannot see that write, and would report every byte of it as uninitialised where the program
# reads it (false positives in p2p/probe, p2p/ordering, examples/pingpong ...). The receiver's
# own process_vm_readv is seen. So the split copy is off here (MADMPI_SHM_SPLIT_MIN=0) unless
# the caller sets it.
export MADMPI_SHM_SPLIT_MIN="${MADMPI_SHM_SPLIT_MIN:-0}"

out=$root/build/check-memory
mkdir -p "$out"
rm -f "$out"/*.vg "$out"/*.log
failed=""
for p in $PROGS; do
    dir=${p%/*}; name=${p#*/}
    if [ "$dir" = examples ]; then src=$root/examples-c/$name.c; else src=$root/tests/c/$p.c; fi
    exe=$out/$dir-$name
    log=$out/$dir-$name.log
    if ! "$root/bin/mpicc" -std=c99 -O1 -g -o "$exe" "$src" >"$log" 2>&1; then
        echo "FAIL $p (does not compile, see $log)"; failed="$failed $p"; continue
    fi
    # Rust's standard library keeps a few allocations for the life of the process: only
    # definite leaks count. Rank logs apart, so that their reports do not interleave.
    "$root/bin/mpirun" --timeout 600 -n "$NP" valgrind -q --error-exitcode=99 \
        --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
        --log-file="$out/$dir-$name.%p.vg" "$exe" >>"$log" 2>&1
    rc=$?
    errs=$(cat "$out/$dir-$name".*.vg 2>/dev/null | grep -c '^==[0-9]*== [A-Z]' || true)
    if [ $rc -eq 0 ]; then
        echo "ok   $p"
    else
        echo "FAIL $p (exit $rc, $errs valgrind report lines: $out/$dir-$name.*.vg)"
        failed="$failed $p"
    fi
done

# The Rust code that is unsafe for speed, through its own tests under valgrind (Miri, which
# would check it more strictly, needs a nightly compiler that cannot be installed here): the
# datatype engine (pack/unpack over type maps, external32), the engine simulation (rendezvous
# pieces, zero-copy datatype blocks, reordering) and the shm ring (records written and read
# in place, corrupt rings). The split-copy tests are left out: the other side's
# process_vm_writev is invisible to valgrind, as above. RUST_TESTS="" skips this part.
RUST_TESTS=${RUST_TESTS-"madmpi-datatypes: madmpi:engine:: madmpi-transports:ring"}
for spec in $RUST_TESTS; do
    pkg=${spec%%:*}; filter=${spec#*:}
    log=$out/rust-$pkg.log
    bins=$(cd "$root" && cargo test --release -p "$pkg" --lib --tests --no-run \
        --message-format=json 2>>"$log" | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
    [ -n "$bins" ] || { echo "FAIL rust $pkg (no test binary, see $log)"; failed="$failed rust:$pkg"; continue; }
    ok=1
    for b in $bins; do
        # shellcheck disable=SC2086
        valgrind -q --error-exitcode=99 "$b" --test-threads=2 $filter >>"$log" 2>&1 || ok=0
    done
    if [ $ok = 1 ]; then
        echo "ok   rust $pkg ${filter:-(all)}"
    else
        echo "FAIL rust $pkg ${filter:-(all)} (see $log)"
        failed="$failed rust:$pkg"
    fi
done
if [ -n "$failed" ]; then
    echo "check-memory: failed:$failed"
    exit 1
fi
echo "check-memory: all clean"
