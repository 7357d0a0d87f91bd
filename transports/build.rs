//! Finds libfabric (pkg-config, 1.17 or newer) for the `ofi` driver and compiles its C shim
//! (`src/ofi/shim.c`: libfabric's data-path calls are inline functions of its headers). When
//! the `ofi` feature is on and libfabric is found, the driver is built (`cfg(madmpi_ofi)`);
//! otherwise the build says why and everything else builds without it.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(madmpi_ofi)");
    println!("cargo::rerun-if-changed=src/ofi/shim.c");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    if std::env::var_os("CARGO_FEATURE_OFI").is_none() {
        return;
    }
    let lib = match pkg_config::Config::new()
        .atleast_version("1.17")
        // For the headers only: the library is opened at run time.
        .cargo_metadata(false)
        .probe("libfabric")
    {
        Ok(lib) => lib,
        Err(e) => {
            println!(
                "cargo::warning=libfabric 1.17+ not found through pkg-config: the ofi transport \
                 is not built (install libfabric-dev, or run scripts/install-deps.sh)"
            );
            // pkg-config's answer, on one line.
            let why: String = e
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            println!(
                "cargo::warning=pkg-config said: {}",
                why.chars().take(300).collect::<String>()
            );
            return;
        }
    };
    let mut build = cc::Build::new();
    build
        .file("src/ofi/shim.c")
        .warnings(true)
        .extra_warnings(true);
    for dir in &lib.include_paths {
        build.include(dir);
    }
    if let Err(e) = build.try_compile("madmpi_ofi_shim") {
        println!(
            "cargo::warning=libfabric {} found but the ofi shim does not compile ({e}): the ofi \
             transport is not built",
            lib.version
        );
        return;
    }
    // Not linked: the shim opens libfabric.so.1 with dlopen on first use (see shim.c), so
    // that a process that never uses ofi does not load it and its provider libraries.
    println!("cargo::rustc-cfg=madmpi_ofi");
}
