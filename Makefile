# madmpi - top-level Makefile.
#
#   make                          cargo build --release, then the build tree: lib/libmadmpi.so
#                                 (+ libmpi.so, libmpi_abi.so.1, libmpi_abi.so), lib/pkgconfig/madmpi.pc
#                                 (+ mpi.pc, mpi-c.pc, ompi-c.pc),
#                                 bin/mpirun and bin/mpiexec (symlinks to the cargo-built launcher)
#   make install PREFIX=dir       installs bin/ (mpicc, mpicxx, mpirun, mpiexec), lib/, include/
#   make uninstall PREFIX=dir     removes exactly what install put there
#   make run | test | bench       see the placeholders at the end
#   make check-memory             C test programs under valgrind (not part of make test)
#
# Variables: PREFIX (default /usr/local), DESTDIR (staging root for packagers), CARGO,
# CARGO_FLAGS (extra `cargo build` flags, e.g. `-p madmpi-launcher` to build one crate),
# CARGO_TARGET_DIR (honoured like cargo does).
# bin/mpicc and bin/mpicxx find include/ and lib/ next to their own bin/, so the same scripts
# serve the build tree and an installation.

PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo
CARGO_FLAGS ?=

TARGET_DIR := $(if $(CARGO_TARGET_DIR),$(abspath $(CARGO_TARGET_DIR)),$(CURDIR)/target)
RELEASE := $(TARGET_DIR)/release
# bin/mpirun points into the tree relatively when cargo uses the tree's target/.
MPIRUN_LINK := $(if $(CARGO_TARGET_DIR),$(RELEASE)/mpirun,../target/release/mpirun)
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

LIB := libmadmpi.so
LIB_BUILT := $(RELEASE)/libmadmpi_lib.so
LIB_ALIASES := libmpi.so libmpi_abi.so.1 libmpi_abi.so
PC_IN := launcher/madmpi.pc.in
# pkg-config names build systems probe for an MPI (mpi, mpi-c: Open MPI's Debian names; ompi-c:
# what Meson's dependency('mpi') asks pkg-config first): links to madmpi.pc, so that a
# PKG_CONFIG_PATH naming our lib/pkgconfig makes them find madmpi before another MPI.
PC_ALIASES := mpi.pc mpi-c.pc ompi-c.pc
WRAPPERS := mpicc mpicxx
HEADERS = $(notdir $(wildcard include/*.h))

INST := $(DESTDIR)$(abspath $(PREFIX))

.PHONY: all cargo-build build-tree install uninstall clean run test bench deps check-memory

all: build-tree

cargo-build:
	$(CARGO) build --release --lib --bins --examples $(CARGO_FLAGS)

# The C library crate is written concurrently with the rest: a missing .so is a warning, so
# the launcher and the wrappers can be built and tested alone.
build-tree: cargo-build
	@mkdir -p lib/pkgconfig
	@if [ -f "$(LIB_BUILT)" ]; then \
	    cp -f "$(LIB_BUILT)" lib/$(LIB).tmp && mv -f lib/$(LIB).tmp lib/$(LIB) && \
	    for a in $(LIB_ALIASES); do ln -sfn $(LIB) lib/$$a; done && \
	    echo "lib/$(LIB) (+ $(LIB_ALIASES))"; \
	else \
	    echo "make: warning: $(LIB_BUILT) was not built; lib/$(LIB) not updated" >&2; \
	fi
	@sed -e 's|@PREFIX@|$(CURDIR)|g' -e 's|@VERSION@|$(VERSION)|g' $(PC_IN) > lib/pkgconfig/madmpi.pc
	@for a in $(PC_ALIASES); do ln -sfn madmpi.pc lib/pkgconfig/$$a; done
	@if [ -x "$(RELEASE)/mpirun" ]; then \
	    ln -sfn "$(MPIRUN_LINK)" bin/mpirun && ln -sfn "$(MPIRUN_LINK)" bin/mpiexec && \
	    echo "bin/mpirun, bin/mpiexec -> $(MPIRUN_LINK)"; \
	else \
	    echo "make: warning: $(RELEASE)/mpirun was not built; bin/mpirun not linked" >&2; \
	fi

install: all
	install -d "$(INST)/bin" "$(INST)/lib/pkgconfig" "$(INST)/include"
	install -m 755 "$(RELEASE)/mpirun" "$(INST)/bin/mpirun"
	install -m 755 "$(RELEASE)/mpirun" "$(INST)/bin/mpiexec"
	install -m 755 $(addprefix bin/,$(WRAPPERS)) "$(INST)/bin/"
	@if [ -f lib/$(LIB) ]; then \
	    echo "install lib/$(LIB) (+ $(LIB_ALIASES))"; \
	    install -m 755 lib/$(LIB) "$(INST)/lib/$(LIB)" && \
	    for a in $(LIB_ALIASES); do ln -sfn $(LIB) "$(INST)/lib/$$a"; done; \
	else \
	    echo "make: warning: lib/$(LIB) does not exist; the library is not installed" >&2; \
	fi
	sed -e 's|@PREFIX@|$(abspath $(PREFIX))|g' -e 's|@VERSION@|$(VERSION)|g' $(PC_IN) > "$(INST)/lib/pkgconfig/madmpi.pc"
	for a in $(PC_ALIASES); do ln -sfn madmpi.pc "$(INST)/lib/pkgconfig/$$a"; done
	@if [ -n "$(HEADERS)" ]; then \
	    echo "install include/$(HEADERS)"; \
	    install -m 644 $(addprefix include/,$(HEADERS)) "$(INST)/include/"; \
	else \
	    echo "make: warning: include/mpi.h does not exist; headers not installed" >&2; \
	fi

uninstall:
	rm -f $(addprefix "$(INST)/bin/",mpirun mpiexec $(WRAPPERS))
	rm -f $(addprefix "$(INST)/lib/",$(LIB) $(LIB_ALIASES)) "$(INST)/lib/pkgconfig/madmpi.pc"
	rm -f $(addprefix "$(INST)/lib/pkgconfig/",$(PC_ALIASES))
	rm -f $(addprefix "$(INST)/include/",$(or $(HEADERS),mpi.h))
	-@rmdir "$(INST)/lib/pkgconfig" 2>/dev/null || true

# Removes what `make` created in the tree (not cargo's target/: use `cargo clean`).
clean:
	rm -rf lib bin/mpirun bin/mpiexec

# ---- run, test, bench ----
# make run: build everything, then build the C examples with bin/mpicc and run a 4-rank job.
NP ?= 4
run: all
	@$(MAKE) --no-print-directory -C examples-c MPICC=$(CURDIR)/bin/mpicc
	$(CURDIR)/bin/mpirun -n $(NP) build/examples-c/hello
	$(CURDIR)/bin/mpirun -n $(NP) build/examples-c/ring

# make test: everything CI runs. Tools first, then formatting and lints, the build tree (the
# integration tests run bin/mpirun and programs built with bin/mpicc), then every test suite.
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(MAKE) --no-print-directory all
	$(MAKE) --no-print-directory -C examples-c MPICC=$(CURDIR)/bin/mpicc CFLAGS="-O2 -Wall -Wextra -Werror"
	$(CARGO) test --workspace --no-fail-fast

# make check-memory: C test programs and the C examples under valgrind, every rank
# (scripts/check-memory.sh: installs valgrind if missing; CHECK_NP=2 ranks, PROGS="p2p/basic ..."
# to choose the programs).
# Not part of `make test`: it takes minutes.
check-memory: all
	@NP=$(or $(CHECK_NP),2) sh scripts/check-memory.sh

deps:
	@sh scripts/install-deps.sh

include bench/Makefile.inc
