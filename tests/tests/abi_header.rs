//! The C interface against the MPI-5.0 standard ABI tables (`mpi-capi/abi/`): `include/mpi.h` is
//! fresh, compiles cleanly as C and C++, says what the tables say (values, types, layout and
//! every prototype), the library exports every function, and the list of unsupported functions
//! in `docs/` is true.
//!
//! Needs `gcc`, `g++` and `nm`. Run with `cargo test -p madmpi-tests --test abi_header`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

fn abi_dir() -> PathBuf {
    workspace().join("mpi-capi").join("abi")
}

fn header_dir() -> PathBuf {
    workspace().join("include")
}

/// `$OUT_DIR` of the build of `madmpi-capi` this test was linked with.
fn capi_out_dir() -> PathBuf {
    PathBuf::from(madmpi_capi::abi::build::OUT_DIR)
}

/// A fresh directory for this test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("abi-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn content_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Rows of a tab-separated ABI table: (name, type, value).
fn tsv(name: &str) -> Vec<(String, String, String)> {
    content_lines(&read(&abi_dir().join(name)))
        .into_iter()
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 3, "{name}: `{l}`");
            (cols[0].to_owned(), cols[1].to_owned(), cols[2].to_owned())
        })
        .collect()
}

fn function_list() -> Vec<String> {
    content_lines(&read(&abi_dir().join("mpi-abi-functions.txt")))
}

/// The declarations of `mpi-abi-signatures.txt`: (callback typedefs, function prototypes).
fn signatures() -> (Vec<String>, Vec<String>) {
    let lines = content_lines(&read(&abi_dir().join("mpi-abi-signatures.txt")));
    lines.into_iter().partition(|l| l.starts_with("typedef "))
}

/// `int MPI_Send(...);` → `MPI_Send`.
fn declared_name(decl: &str) -> &str {
    let head = &decl[..decl.find('(').expect("a prototype")];
    head.rsplit(|c: char| c.is_whitespace() || c == '*')
        .next()
        .unwrap()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const STRICT: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic"];

#[test]
fn committed_header_and_unsupported_list_are_fresh() {
    let out = capi_out_dir();
    for (fresh, committed) in [
        (out.join("mpi.h"), header_dir().join("mpi.h")),
        (
            out.join("unsupported-functions.md"),
            workspace().join("docs").join("unsupported-functions.md"),
        ),
    ] {
        assert!(
            read(&fresh) == read(&committed),
            "{} differs from what the build generates ({}): rebuild madmpi-capi and commit it",
            committed.display(),
            fresh.display()
        );
    }
    // In CI the build has just rewritten them: a difference from the commit is a stale commit.
    if std::env::var_os("CI").is_some() {
        run(Command::new("git").current_dir(workspace()).args([
            "diff",
            "--exit-code",
            "--",
            "include/mpi.h",
            "docs/unsupported-functions.md",
        ]));
    }
}

/// The README lists the implemented and unsupported functions (a block the build generates).
#[test]
fn readme_function_lists_are_fresh() {
    let block = read(&capi_out_dir().join("readme-functions.md"));
    let readme = read(&workspace().join("README.md"));
    assert!(
        readme.contains(&block),
        "README.md's function lists differ from what the build generates: rebuild madmpi-capi and commit README.md"
    );
}

#[test]
fn header_compiles_cleanly_as_c_and_cxx() {
    let dir = scratch("compile");
    let source = workspace()
        .join("tests")
        .join("c")
        .join("abi")
        .join("compile_header.c");
    for (compiler, lang, std) in [
        ("gcc", "c", "-std=c99"),
        ("gcc", "c", "-std=c11"),
        ("g++", "c++", "-std=c++11"),
        ("g++", "c++", "-std=c++17"),
    ] {
        run(Command::new(compiler)
            .args(STRICT)
            .args([std, "-x", lang, "-c", "-I"])
            .arg(header_dir())
            .arg(&source)
            .arg("-o")
            .arg(dir.join(format!("{compiler}{std}.o"))));
    }
}

/// A C11 program checking the header against the tables: `_Static_assert` on every integer
/// constant and on the type of every constant (`_Generic`), run-time checks of pointer values,
/// the layout of `MPI_Status` and the scalar types, the callback types, and an assignment of
/// every function (and its `PMPI_` twin) to a pointer of the table's type, which `-Werror`
/// rejects on any difference of parameter or return type.
fn header_check_program() -> String {
    let mut c = String::from(
        "#include <mpi.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n\n\
         #define SAME_TYPE(expr, type) _Generic((expr), type: 1, default: 0)\n\
         static int failures;\n\
         #define CHECK(cond) do { if (!(cond)) { \
         fprintf(stderr, \"failed: %s\\n\", #cond); failures++; } } while (0)\n\n\
         _Static_assert(sizeof(MPI_Status) == 32, \"MPI_Status size\");\n\
         _Static_assert(offsetof(MPI_Status, MPI_SOURCE) == 0, \"MPI_SOURCE\");\n\
         _Static_assert(offsetof(MPI_Status, MPI_TAG) == 4, \"MPI_TAG\");\n\
         _Static_assert(offsetof(MPI_Status, MPI_ERROR) == 8, \"MPI_ERROR\");\n\
         _Static_assert(offsetof(MPI_Status, MPI_internal) == 12, \"MPI_internal\");\n\
         _Static_assert(sizeof(((MPI_Status *)0)->MPI_internal) == 5 * sizeof(int), \"MPI_internal[5]\");\n\
         _Static_assert(SAME_TYPE((MPI_Aint)0, intptr_t), \"MPI_Aint is intptr_t\");\n\
         _Static_assert(sizeof(MPI_Aint) == sizeof(intptr_t), \"sizeof MPI_Aint\");\n\
         _Static_assert(SAME_TYPE((MPI_Count)0, int64_t), \"MPI_Count is int64_t\");\n\
         _Static_assert(sizeof(MPI_Count) == 8, \"sizeof MPI_Count\");\n\
         _Static_assert(SAME_TYPE((MPI_Offset)0, int64_t), \"MPI_Offset is int64_t\");\n\
         _Static_assert(SAME_TYPE((MPI_Fint)0, int), \"MPI_Fint is int\");\n\
         _Static_assert(SAME_TYPE((MPI_T_cb_safety)0, int), \"MPI_T_cb_safety\");\n\
         _Static_assert(SAME_TYPE((MPI_T_source_order)0, int), \"MPI_T_source_order\");\n\
         _Static_assert(MADMPI == 1, \"MADMPI\");\n\n",
    );
    let mut runtime = String::new();
    let constants = tsv("mpi-abi-constants.tsv");
    let type_of = |target: &str| {
        constants
            .iter()
            .find(|(n, _, _)| n == target)
            .map(|(_, t, _)| t.clone())
            .unwrap_or_else(|| panic!("alias of unknown {target}"))
    };
    for (name, ty, value) in &constants {
        match ty.as_str() {
            "handle-type" => {
                let incomplete = value
                    .strip_prefix("pointer to incomplete struct ")
                    .unwrap_or_else(|| panic!("{name}: `{value}`"));
                writeln!(
                    c,
                    "_Static_assert(SAME_TYPE(({name})0, struct {incomplete} *), \"{name}\");"
                )
                .unwrap();
            }
            "int" => writeln!(
                c,
                "_Static_assert(SAME_TYPE({name}, int) && {name} == {value}, \"{name}\");"
            )
            .unwrap(),
            "MPI_Offset" => writeln!(
                c,
                "_Static_assert(SAME_TYPE({name}, MPI_Offset) && {name} == {value}, \"{name}\");"
            )
            .unwrap(),
            "alias" => {
                writeln!(
                    c,
                    "_Static_assert(SAME_TYPE({name}, {}), \"{name}\");",
                    type_of(value)
                )
                .unwrap();
                writeln!(runtime, "    CHECK({name} == {value});").unwrap();
            }
            pointer => {
                let pointer = pointer.replace('*', " *");
                writeln!(
                    c,
                    "_Static_assert(SAME_TYPE({name}, {pointer}), \"{name}\");"
                )
                .unwrap();
                writeln!(runtime, "    CHECK((intptr_t){name} == {value});").unwrap();
            }
        }
    }
    for (name, callback, value) in tsv("mpi-abi-callbacks.tsv") {
        writeln!(
            c,
            "_Static_assert(SAME_TYPE({name}, {callback} *), \"{name}\");"
        )
        .unwrap();
        writeln!(runtime, "    CHECK((intptr_t){name} == {value});").unwrap();
    }
    let (callbacks, functions) = signatures();
    for typedef in &callbacks {
        let name = declared_name(typedef);
        let expected = typedef.replacen(&format!(" {name}("), &format!(" expected_{name}("), 1);
        writeln!(
            c,
            "{expected}\n_Static_assert(SAME_TYPE(({name} *)0, expected_{name} *), \"{name}\");"
        )
        .unwrap();
    }
    for proto in &functions {
        let name = declared_name(proto);
        for symbol in [name.to_owned(), name.replacen("MPI_", "PMPI_", 1)] {
            let pointer = proto
                .replacen(&format!(" {name}("), &format!(" (*p_{symbol})("), 1)
                .replacen(");", &format!(") = {symbol};"), 1);
            writeln!(c, "{pointer}").unwrap();
        }
    }
    write!(
        c,
        "\nint main(void)\n{{\n{runtime}    if (failures == 0) printf(\"ok\\n\");\n    return failures != 0;\n}}\n"
    )
    .unwrap();
    c
}

#[test]
fn header_matches_the_abi_tables() {
    let dir = scratch("check");
    let source = dir.join("check_header.c");
    fs::write(&source, header_check_program()).unwrap();
    // Linked against the library, since it takes the address of every function.
    let exe = dir.join("check_header");
    let mut gcc = Command::new("gcc");
    gcc.arg("-std=c11")
        .args(STRICT)
        .arg("-I")
        .arg(header_dir())
        .arg(&source)
        .arg("-o")
        .arg(&exe);
    link_against_library(&mut gcc, &dir);
    run(&mut gcc);
    assert_eq!(run(&mut Command::new(&exe)), "ok\n");
}

/// `libmadmpi_lib.so` (crate `madmpi-lib`) of this build: next to the test's dependencies, or built on demand.
fn library() -> PathBuf {
    const NAME: &str = "libmadmpi_lib.so";
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let profile_dir = deps.parent().unwrap().to_path_buf();
    let newest = || {
        [deps.join(NAME), profile_dir.join(NAME)]
            .into_iter()
            .filter_map(|p| Some((fs::metadata(&p).ok()?.modified().ok()?, p)))
            .max()
            .map(|(_, p)| p)
    };
    if let Some(path) = newest() {
        return path;
    }
    let mut cargo = Command::new(option_env!("CARGO").unwrap_or("cargo"));
    cargo
        .current_dir(workspace())
        .args(["build", "-p", "madmpi-lib", "--target-dir"])
        .arg(profile_dir.parent().unwrap());
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cargo.arg("--release");
    }
    run(&mut cargo);
    newest().unwrap_or_else(|| panic!("no {NAME} in {}", profile_dir.display()))
}

/// Links a C program against the library as installed: `libmadmpi.so`, its soname, here a link
/// to the build's `libmadmpi_lib.so` in `dir`.
fn link_against_library(gcc: &mut Command, dir: &Path) {
    let installed = dir.join("libmadmpi.so");
    let _ = fs::remove_file(&installed);
    std::os::unix::fs::symlink(library(), &installed).unwrap();
    gcc.arg(format!("-L{}", dir.display()))
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .arg("-lmadmpi");
}

#[test]
fn library_exports_every_function_and_its_pmpi_twin() {
    let lib = library();
    let nm = run(Command::new("nm").args(["-D", "--defined-only"]).arg(&lib));
    let exported: BTreeSet<&str> = nm
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.len() == 3 && matches!(cols[1], "T" | "W" | "i")).then(|| cols[2])
        })
        .collect();
    let (_, functions) = signatures();
    let mut names: BTreeSet<String> = function_list().into_iter().collect();
    names.extend(functions.iter().map(|p| declared_name(p).to_owned()));
    let missing: Vec<String> = names
        .iter()
        .flat_map(|n| [n.clone(), n.replacen("MPI_", "PMPI_", 1)])
        .filter(|s| !exported.contains(s.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} does not export {missing:?}",
        lib.display()
    );
    let soname = run(Command::new("readelf").arg("-d").arg(&lib));
    assert!(
        soname.contains("Library soname: [libmadmpi.so]"),
        "soname:\n{soname}"
    );
}

#[test]
fn program_calls_the_library_through_the_header() {
    let dir = scratch("link");
    let exe = dir.join("link_smoke");
    let mut gcc = Command::new("gcc");
    gcc.arg("-std=c99")
        .args(STRICT)
        .arg("-I")
        .arg(header_dir())
        .arg(
            workspace()
                .join("tests")
                .join("c")
                .join("abi")
                .join("link_smoke.c"),
        )
        .arg("-o")
        .arg(&exe);
    link_against_library(&mut gcc, &dir);
    run(&mut gcc);
    assert_eq!(run(&mut Command::new(&exe)), "ok\n");
}

/// Names of the functions `mpi-capi/src/imp/` defines (`fn MPI_Xxx(` outside comments), with
/// the wrappers `mpi-capi/build.rs` generates into its `OUT_DIR` and `src/imp/` includes (the
/// collectives, the MPI-IO data-access calls, the partitioned inits).
fn implemented_functions() -> BTreeSet<String> {
    fn scan(text: &str, names: &mut BTreeSet<String>) {
        let mut text = text.to_owned();
        while let Some(start) = text.find("/*") {
            let end = text[start..]
                .find("*/")
                .map_or(text.len(), |e| start + e + 2);
            text.replace_range(start..end, " ");
        }
        for line in text.lines() {
            let code = line.split("//").next().unwrap();
            for (i, _) in code.match_indices("fn MPI_") {
                let name: String = code[i + 3..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let after = code[i + 3 + name.len()..].trim_start();
                if after.starts_with('(') || after.starts_with('<') {
                    names.insert(name);
                }
            }
        }
    }
    fn walk(dir: &Path, names: &mut BTreeSet<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, names);
            } else if path.extension().is_some_and(|e| e == "rs") {
                scan(&read(&path), names);
            }
        }
    }
    let mut names = BTreeSet::new();
    walk(
        &workspace().join("mpi-capi").join("src").join("imp"),
        &mut names,
    );
    let before = names.len();
    for generated in ["coll_wrappers.rs", "io_wrappers.rs", "part_wrappers.rs"] {
        scan(&read(&capi_out_dir().join(generated)), &mut names);
    }
    assert!(
        names.len() > before + 150,
        "generated wrappers: {} functions",
        names.len() - before
    );
    names
}

#[test]
fn unsupported_list_is_true() {
    // A function is unsupported when it returns an error code (not a value: MPI_Wtime, the
    // conversions), is not variadic (MPI_Pcontrol is a no-op by definition), is no conversion
    // (src/convert.rs) and src/imp/ does not define it.
    let implemented = implemented_functions();
    let (_, functions) = signatures();
    let expected: Vec<String> = functions
        .iter()
        .filter(|p| p.starts_with("int ") && !p.contains("..."))
        .map(|p| declared_name(p).to_owned())
        .filter(|n| {
            !["_c2f", "_f2c", "_toint", "_fromint"]
                .iter()
                .any(|s| n.ends_with(s))
                && n != "MPI_Aint_add"
                && n != "MPI_Aint_diff"
                && !implemented.contains(n)
        })
        .collect();
    let docs = read(&workspace().join("docs").join("unsupported-functions.md"));
    let listed: Vec<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("- `")?.strip_suffix('`').map(str::to_owned))
        .collect();
    let expected_set: BTreeSet<&String> = expected.iter().collect();
    let listed_set: BTreeSet<&String> = listed.iter().collect();
    assert!(
        expected_set == listed_set,
        "docs/unsupported-functions.md is wrong.\nimplemented but listed: {:?}\nunsupported but not listed: {:?}",
        listed_set.difference(&expected_set).collect::<Vec<_>>(),
        expected_set.difference(&listed_set).collect::<Vec<_>>()
    );
    assert!(
        docs.contains(&format!(
            "{} of {} functions",
            expected.len(),
            functions.len()
        )),
        "docs/unsupported-functions.md has the wrong count"
    );
    let from_build = read(&capi_out_dir().join("unsupported.txt"));
    assert_eq!(
        from_build.lines().collect::<Vec<_>>(),
        expected.iter().map(String::as_str).collect::<Vec<_>>(),
        "the build's unsupported.txt disagrees with src/imp/"
    );
}
