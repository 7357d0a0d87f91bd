//! Build script of `madmpi-lib`: the shared library's soname is `libmadmpi.so` (the name
//! `mpicc` links against and `make` installs under `lib/`), whatever Cargo names the file.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if ELF_OSES.contains(&os.as_str()) {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmadmpi.so");
    }
}

/// Systems whose linker takes `-soname`.
const ELF_OSES: &[&str] = &[
    "linux",
    "android",
    "freebsd",
    "netbsd",
    "openbsd",
    "dragonfly",
    "solaris",
    "illumos",
];
