//! Build script of `madmpi-capi`: everything mechanical about the C ABI comes from the tables in
//! `abi/` and is generated here, so that adding a function is adding one line to a table.
//!
//! Inputs: `abi/mpi-abi-functions.txt` (the standard ABI's function list),
//! `abi/mpi-abi-signatures.txt` (one C declaration per function and callback type),
//! `abi/mpi-abi-constants.tsv` and `abi/mpi-abi-callbacks.tsv` (constants), `src/abi.rs` (the
//! Rust items cbindgen reads) and the names of the functions defined under `src/imp/`.
//!
//! Outputs, all in `$OUT_DIR`:
//! - `coll_wrappers.rs`: `crate::imp::MPI_Xxx` for every form of the collectives (blocking,
//!   `MPI_I*`, `MPI_*_init`, each with its `_c` twin), one call to the collective's hand-written
//!   `_impl` each; included by `src/imp/coll/mod.rs` and counted as defined under `src/imp/`.
//! - `io_wrappers.rs`: the same for the MPI-IO data-access calls (`MPI_File_read*`,
//!   `MPI_File_write*`, `MPI_File_i*`, the split collectives, each `_c` twin), one call to the
//!   helper of its form each; included by `src/imp/io/mod.rs`.
//! - `part_wrappers.rs`: the same for `MPI_Psend_init`, `MPI_Precv_init` and their `_c` twins;
//!   included by `src/imp/part.rs`.
//! - `generated.rs`: for every function, `MPI_Xxx` and `PMPI_Xxx` with the exact C signature. Each
//!   body is a panic boundary around one call: `crate::imp::MPI_Xxx` when `src/imp/` defines
//!   `fn MPI_Xxx(`, `crate::convert::MPI_Xxx` for the pure conversions, and otherwise
//!   `crate::errors::unsupported("MPI_Xxx", comm)`. Implemented functions that return an error
//!   code also hold a `madmpi::trace` guard for the duration of the call (`MADMPI_TRACE`).
//! - `abi_check.rs`: compile-time (and unit-test) checks of `src/abi.rs` against the tables.
//! - `mpi.h`: cbindgen's output for `src/abi.rs` and `generated.rs`, with the parts cbindgen
//!   cannot express written from the tables. Copied to `include/mpi.h` when it changed.
//! - `unsupported.txt`: the functions that report `MPI_ERR_UNSUPPORTED_OPERATION`, and
//!   `unsupported-functions.md`, the same list for readers, copied to `docs/` when it changed.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env("OUT_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("mpi-capi lives in the workspace")
        .to_path_buf();
    let abi_dir = manifest_dir.join("abi");
    let imp_dir = manifest_dir.join("src").join("imp");
    let abi_rs = manifest_dir.join("src").join("abi.rs");
    for path in [
        &abi_dir,
        &imp_dir,
        &abi_rs,
        &manifest_dir.join("Cargo.toml"),
    ] {
        println!("cargo:rerun-if-changed={}", path.display());
    }

    let list = read_function_list(&abi_dir.join("mpi-abi-functions.txt"));
    let table = SignatureTable::parse(&read(&abi_dir.join("mpi-abi-signatures.txt")));
    let constants = read_tsv(&abi_dir.join("mpi-abi-constants.tsv"));
    let callback_constants = read_tsv(&abi_dir.join("mpi-abi-callbacks.tsv"));
    table.check_covers(&list);

    let mut implemented = scan_implemented(&imp_dir);
    // The collective wrappers are generated from the signatures (except those written by hand).
    let (coll_wrappers, coll_names) = generate_coll_wrappers(&table, &implemented);
    write_if_changed(&out_dir.join("coll_wrappers.rs"), &coll_wrappers);
    implemented.extend(coll_names);
    // So are the MPI-IO data-access calls.
    let (io_wrappers, io_names) = generate_io_wrappers(&table, &implemented);
    write_if_changed(&out_dir.join("io_wrappers.rs"), &io_wrappers);
    implemented.extend(io_names);
    // And the partitioned inits.
    let (part_wrappers, part_names) = generate_part_wrappers(&table, &implemented);
    write_if_changed(&out_dir.join("part_wrappers.rs"), &part_wrappers);
    implemented.extend(part_names);
    for name in &implemented {
        if !table.functions.iter().any(|f| &f.name == name) {
            println!(
                "cargo:warning=src/imp defines `fn {name}(`, which is no function of the ABI table"
            );
        }
    }
    let plans: Vec<Plan> = table
        .functions
        .iter()
        .map(|f| Plan::new(f, &implemented))
        .collect();

    let generated = generate_exports(&plans, &table, &constants);
    write_if_changed(&out_dir.join("generated.rs"), &generated);
    write_if_changed(
        &out_dir.join("abi_check.rs"),
        &generate_abi_check(&table, &constants, &callback_constants),
    );

    let header = generate_header(
        &abi_rs,
        &out_dir.join("generated.rs"),
        &table,
        &constants,
        &callback_constants,
    );
    write_if_changed(&out_dir.join("mpi.h"), &header);
    update_workspace_file(&workspace.join("include").join("mpi.h"), &header);

    let unsupported: Vec<&str> = plans
        .iter()
        .filter(|p| p.route == Route::Unsupported)
        .map(|p| p.func.name.as_str())
        .collect();
    let mut list_txt = String::new();
    for name in &unsupported {
        writeln!(list_txt, "{name}").unwrap();
    }
    write_if_changed(&out_dir.join("unsupported.txt"), &list_txt);
    let markdown = unsupported_markdown(&unsupported, plans.len());
    write_if_changed(&out_dir.join("unsupported-functions.md"), &markdown);
    update_workspace_file(
        &workspace.join("docs").join("unsupported-functions.md"),
        &markdown,
    );

    // The README's list of implemented and unsupported functions, between markers.
    let implemented: Vec<&str> = plans
        .iter()
        .filter(|p| p.route != Route::Unsupported && !p.func.name.starts_with("PMPI_"))
        .map(|p| p.func.name.as_str())
        .collect();
    let block = readme_block(&implemented, &unsupported);
    write_if_changed(&out_dir.join("readme-functions.md"), &block);
    let readme_path = workspace.join("README.md");
    println!("cargo:rerun-if-changed={}", readme_path.display());
    if let Ok(readme) = fs::read_to_string(&readme_path) {
        if let Some(updated) = splice_readme(&readme, &block) {
            update_workspace_file(&readme_path, &updated);
        }
    }
}

/// Functions computed from their arguments alone, implemented in `src/convert.rs`.
fn is_conversion(name: &str) -> bool {
    ["_c2f", "_f2c", "_toint", "_fromint"]
        .iter()
        .any(|suffix| name.ends_with(suffix))
        || name == "MPI_Aint_add"
        || name == "MPI_Aint_diff"
}

// ----------------------------------------------------------------------------------------------
// Tables
// ----------------------------------------------------------------------------------------------

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Lines that are neither empty nor `#` comments.
fn content_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

fn read_function_list(path: &Path) -> Vec<String> {
    content_lines(&read(path)).map(str::to_owned).collect()
}

/// Rows of a tab-separated table: name, type, value.
struct Row {
    name: String,
    ty: String,
    value: String,
}

fn read_tsv(path: &Path) -> Vec<Row> {
    content_lines(&read(path))
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert!(cols.len() == 3, "{}: bad row `{line}`", path.display());
            Row {
                name: cols[0].to_owned(),
                ty: cols[1].to_owned(),
                value: cols[2].to_owned(),
            }
        })
        .collect()
}

/// A C type as written in a declaration: `const base **name[][3]`.
#[derive(Clone, Debug)]
struct CType {
    base: String,
    /// `const` qualifies the base type (the only place the table uses it).
    konst: bool,
    stars: usize,
    /// Array dimensions after the name; `None` is `[]`.
    dims: Vec<Option<usize>>,
}

#[derive(Clone, Debug)]
struct Param {
    name: String,
    ty: CType,
}

/// One line of the signature table: a function or a callback typedef.
#[derive(Clone, Debug)]
struct Decl {
    /// The line as written (normalized to one space between tokens).
    text: String,
    name: String,
    ret: CType,
    params: Vec<Param>,
    variadic: bool,
}

struct SignatureTable {
    callbacks: Vec<Decl>,
    functions: Vec<Decl>,
}

impl SignatureTable {
    fn parse(text: &str) -> Self {
        let mut callbacks = Vec::new();
        let mut functions = Vec::new();
        for line in content_lines(text) {
            let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
            match line.strip_prefix("typedef ") {
                Some(rest) => callbacks.push(parse_decl(rest, &line)),
                None => functions.push(parse_decl(&line, &line)),
            }
        }
        let mut seen = BTreeSet::new();
        for f in functions.iter().chain(&callbacks) {
            assert!(seen.insert(&f.name), "{} is declared twice", f.name);
        }
        let table = SignatureTable {
            callbacks,
            functions,
        };
        for f in table.functions.iter().chain(&table.callbacks) {
            // Fails the build here rather than in the generated code.
            if !returns_void(f) {
                rust_type(&f.ret, &table, true);
            }
            for p in &f.params {
                rust_type(&p.ty, &table, false);
            }
        }
        table
    }

    fn is_callback(&self, name: &str) -> bool {
        self.callbacks.iter().any(|c| c.name == name)
    }

    /// Every listed function has a signature, and every other signature is a conversion the
    /// standard defines outside the ABI list.
    fn check_covers(&self, list: &[String]) {
        let declared: BTreeSet<&str> = self.functions.iter().map(|f| f.name.as_str()).collect();
        let missing: Vec<&String> = list
            .iter()
            .filter(|n| !declared.contains(n.as_str()))
            .collect();
        assert!(missing.is_empty(), "no signature for {missing:?}");
        let listed: BTreeSet<&str> = list.iter().map(String::as_str).collect();
        for f in &self.functions {
            assert!(
                listed.contains(f.name.as_str()) || is_conversion(&f.name),
                "{} is in the signature table but not in mpi-abi-functions.txt",
                f.name
            );
        }
    }
}

fn parse_decl(text: &str, line: &str) -> Decl {
    let body = text
        .strip_suffix(';')
        .unwrap_or_else(|| panic!("`{line}`: missing `;`"));
    let open = body.find('(').unwrap_or_else(|| panic!("`{line}`: no `(`"));
    let args = body[open + 1..]
        .strip_suffix(')')
        .unwrap_or_else(|| panic!("`{line}`: does not end with `)`"));
    let head = parse_declarator(&body[..open], line);
    assert!(head.ty.dims.is_empty(), "`{line}`: array return type");
    let mut params = Vec::new();
    let mut variadic = false;
    let args = args.trim();
    if args != "void" && !args.is_empty() {
        for arg in args.split(',') {
            let arg = arg.trim();
            if arg == "..." {
                variadic = true;
            } else {
                assert!(!variadic, "`{line}`: `...` must come last");
                params.push(parse_declarator(arg, line));
            }
        }
    }
    Decl {
        text: line.to_owned(),
        name: head.name,
        ret: head.ty,
        params,
        variadic,
    }
}

/// Parses `const char *name[]`-like declarators (no function pointers: the table names every
/// callback type).
fn parse_declarator(text: &str, line: &str) -> Param {
    let mut tokens: Vec<String> = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if is_word_char(c) {
            let mut word = String::new();
            while let Some(&c) = chars.peek().filter(|c| is_word_char(**c)) {
                word.push(c);
                chars.next();
            }
            tokens.push(word);
        } else {
            tokens.push(c.to_string());
            chars.next();
        }
    }
    let bracket = tokens.iter().position(|t| t == "[").unwrap_or(tokens.len());
    let (name, prefix) = tokens[..bracket]
        .split_last()
        .unwrap_or_else(|| panic!("`{line}`: empty declarator"));
    assert!(
        name.chars().all(is_word_char) && name != "const",
        "`{line}`: no name in `{text}`"
    );
    let mut konst = false;
    let mut base = Vec::new();
    let mut stars = 0;
    for t in prefix {
        match t.as_str() {
            "const" if stars == 0 => konst = true,
            "*" => stars += 1,
            word if stars == 0 && word.chars().all(is_word_char) => base.push(word.to_owned()),
            other => panic!("`{line}`: unexpected `{other}` in `{text}`"),
        }
    }
    assert!(
        base.len() == 1,
        "`{line}`: type of `{name}` is not one word"
    );
    let mut dims = Vec::new();
    let mut rest = &tokens[bracket..];
    while !rest.is_empty() {
        let (dim, len) = match rest {
            [open, close, ..] if open == "[" && close == "]" => (None, 2),
            [open, n, close, ..] if open == "[" && close == "]" => (
                Some(
                    n.parse::<usize>()
                        .unwrap_or_else(|_| panic!("`{line}`: bad array size `{n}`")),
                ),
                3,
            ),
            _ => panic!("`{line}`: bad array declarator in `{text}`"),
        };
        assert!(
            dim.is_some() || dims.is_empty(),
            "`{line}`: only the first dimension may be empty"
        );
        dims.push(dim);
        rest = &rest[len..];
    }
    Param {
        name: name.clone(),
        ty: CType {
            base: base.remove(0),
            konst,
            stars,
            dims,
        },
    }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The Rust spelling of a C type. Callback types become the nullable function pointer aliases of
/// `abi.rs`, whether written as the function type or a pointer to it (C adjusts one to the other).
fn rust_type(ty: &CType, table: &SignatureTable, is_return: bool) -> String {
    if table.is_callback(&ty.base) {
        assert!(
            ty.stars <= 1 && ty.dims.is_empty() && !ty.konst && !is_return,
            "callback type {} used other than as a parameter",
            ty.base
        );
        return ty.base.clone();
    }
    let base = match ty.base.as_str() {
        "int" => "c_int",
        "char" => "c_char",
        "void" => "c_void",
        "double" => "f64",
        other if other.starts_with("MPI_") => other,
        other => panic!("unknown C type `{other}`"),
    };
    if is_return {
        assert!(
            ty.stars == 0 && !ty.konst && base != "c_void",
            "unsupported return type {ty:?}"
        );
    }
    let mut rust = base.to_owned();
    let mut pointee_const = ty.konst;
    for _ in 0..ty.stars {
        rust = format!("*{} {rust}", if pointee_const { "const" } else { "mut" });
        pointee_const = false;
    }
    let (unsized_first, sized) = match ty.dims.first() {
        Some(None) => (true, &ty.dims[1..]),
        _ => (false, &ty.dims[..]),
    };
    for dim in sized.iter().rev() {
        rust = format!("[{rust}; {}]", dim.expect("checked when parsing"));
    }
    if unsized_first {
        rust = format!("*{} {rust}", if pointee_const { "const" } else { "mut" });
    } else {
        assert!(
            sized.is_empty(),
            "array parameters must have an empty first dimension"
        );
    }
    rust
}

// ----------------------------------------------------------------------------------------------
// Which code answers each function
// ----------------------------------------------------------------------------------------------

/// Names of the functions `src/imp/**/*.rs` defines: every `fn MPI_Xxx(` outside comments.
fn scan_implemented(dir: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut files = Vec::new();
    collect_rs_files(dir, &mut files);
    for file in files {
        let code = strip_comments(&read(&file));
        let mut rest = code.as_str();
        while let Some(at) = rest.find("fn ") {
            let preceded_by_word = rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            rest = &rest[at + 3..];
            if preceded_by_word {
                continue;
            }
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let after = rest.trim_start()[name.len()..].trim_start();
            if name.starts_with("MPI_") && (after.starts_with('(') || after.starts_with('<')) {
                names.insert(name);
            }
        }
    }
    names
}

fn collect_rs_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            collect_rs_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// Removes `//` and (nested) `/* */` comments, keeping string literals intact enough for the
/// scan (a `//` inside a string literal is not a comment).
fn strip_comments(code: &str) -> String {
    let bytes = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    let mut depth = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let two = &bytes[i..bytes.len().min(i + 2)];
        if depth > 0 {
            if two == b"*/" {
                depth -= 1;
                i += 2;
            } else if two == b"/*" {
                depth += 1;
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        if in_string {
            if bytes[i] == b'\\' {
                i += 2;
                continue;
            }
            if bytes[i] == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        if two == b"//" {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if two == b"/*" {
            depth = 1;
            i += 2;
            continue;
        }
        if bytes[i] == b'"' {
            in_string = true;
        }
        // Only ASCII matters to the scan; keep byte positions of everything else as spaces.
        out.push(if bytes[i].is_ascii() {
            bytes[i] as char
        } else {
            ' '
        });
        i += 1;
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// `crate::imp::MPI_Xxx`.
    Imp,
    /// `crate::convert::MPI_Xxx`.
    Convert,
    /// `crate::errors::unsupported`.
    Unsupported,
    /// `MPI_Pcontrol` without an implementation: the standard's no-op.
    NoOp,
}

struct Plan<'a> {
    func: &'a Decl,
    route: Route,
}

impl<'a> Plan<'a> {
    fn new(func: &'a Decl, implemented: &BTreeSet<String>) -> Self {
        let route = if implemented.contains(&func.name) {
            Route::Imp
        } else if is_conversion(&func.name) {
            Route::Convert
        } else if func.variadic {
            Route::NoOp
        } else if !returns_error_code(func) {
            // MPI_Wtime/MPI_Wtick have no error path: the implementation must provide them, and
            // the build fails at the call below until it does.
            Route::Imp
        } else {
            Route::Unsupported
        };
        Plan { func, route }
    }
}

/// Callbacks may return nothing; functions never do.
fn returns_void(decl: &Decl) -> bool {
    decl.ret.base == "void" && decl.ret.stars == 0
}

/// Whether the function returns an MPI error code (rather than a value such as a handle).
fn returns_error_code(func: &Decl) -> bool {
    func.ret.base == "int" && !func.name.ends_with("_toint")
}

// ----------------------------------------------------------------------------------------------
// generated.rs
// ----------------------------------------------------------------------------------------------

fn generate_exports(plans: &[Plan], table: &SignatureTable, constants: &[Row]) -> String {
    let null_handles: HashMap<&str, &str> = constants
        .iter()
        .filter(|r| r.name.ends_with("_NULL") && r.ty.starts_with("MPI_"))
        .map(|r| (r.ty.as_str(), r.name.as_str()))
        .collect();
    let mut out = String::from(
        "// Generated by mpi-capi/build.rs from abi/mpi-abi-signatures.txt. Do not edit.\n\
         use std::os::raw::{c_char, c_int, c_void};\n",
    );
    for prefix in ["MPI_", "PMPI_"] {
        for plan in plans {
            generate_export(&mut out, prefix, plan, table, &null_handles);
        }
    }
    out
}

fn generate_export(
    out: &mut String,
    prefix: &str,
    plan: &Plan,
    table: &SignatureTable,
    null_handles: &HashMap<&str, &str>,
) {
    let f = plan.func;
    let symbol = format!("{prefix}{}", &f.name["MPI_".len()..]);
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, rust_type(&p.ty, table, false)))
        .collect();
    let args: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
    let ret = rust_type(&f.ret, table, true);
    let name = &f.name;
    if f.variadic {
        // Stable Rust cannot define a C-variadic function. Every C calling convention passes the
        // named arguments of a variadic call as it passes them to a fixed-arity function and has
        // the caller remove the rest, so a definition taking only the named parameters is
        // ABI-compatible with the variadic prototype of mpi.h. (A C definition linked into the
        // cdylib would not be exported: rustc's version script lists Rust symbols only.)
        assert!(
            returns_error_code(f),
            "{name}: variadic functions return an error code"
        );
        writeln!(
            out,
            "\n/// `{}`, defined with its named parameters only (see build.rs).",
            f.text
        )
        .unwrap();
    }
    // The callee may be a safe function (the conversions are).
    writeln!(out, "#[no_mangle]\n#[allow(unused_unsafe)]").unwrap();
    writeln!(
        out,
        "pub unsafe extern \"C\" fn {symbol}({}) -> {ret} {{",
        params.join(", ")
    )
    .unwrap();
    let call = match plan.route {
        Route::Imp => format!("unsafe {{ crate::imp::{name}({}) }}", args.join(", ")),
        Route::Convert => format!("unsafe {{ crate::convert::{name}({}) }}", args.join(", ")),
        Route::Unsupported => {
            let comm = f
                .params
                .iter()
                .find(|p| p.ty.base == "MPI_Comm" && p.ty.stars == 0 && p.ty.dims.is_empty())
                .map_or("crate::abi::MPI_COMM_NULL", |p| p.name.as_str());
            format!("crate::errors::unsupported({name:?}, {comm})")
        }
        Route::NoOp => {
            // The standard: without a profiling library attached, MPI_Pcontrol has no effect.
            writeln!(out, "    crate::abi::MPI_SUCCESS\n}}").unwrap();
            return;
        }
    };
    // The traced call is a cold function of its own (one per MPI function, shared by its two
    // symbols): the wrapper's path with tracing off is then one flag test before the call,
    // where a guard kept in the wrapper made it save and restore every register it used to
    // keep the arguments (about 25 instructions on every call). `MPI_Init*` and
    // `MPI_Finalize`, whose hooks always run, keep their guard inline.
    let split = plan.route == Route::Imp
        && returns_error_code(f)
        && !matches!(
            name.as_str(),
            "MPI_Init" | "MPI_Init_thread" | "MPI_Finalize"
        );
    if split {
        writeln!(
            out,
            "    if ::madmpi::trace::on() {{\n        return unsafe {{ traced_{name}({}) }};\n    }}",
            args.join(", ")
        )
        .unwrap();
    } else if plan.route == Route::Imp && returns_error_code(f) {
        writeln!(out, "    let _trace = {};", trace_hook(f)).unwrap();
    }
    let on_panic = if returns_error_code(f) {
        format!("crate::errors::panicked({name:?})")
    } else {
        let fallback = match f.ret.base.as_str() {
            "double" => "0.0",
            "int" | "MPI_Fint" | "MPI_Aint" => "0",
            handle => null_handles
                .get(handle)
                .copied()
                .unwrap_or_else(|| panic!("{name}: no null constant for {handle}")),
        };
        format!("{{\n            let _ = crate::errors::panicked({name:?});\n            {fallback}\n        }}")
    };
    let guarded = format!(
        "    match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| {call})) {{\n        Ok(ret) => ret,\n        Err(_) => {on_panic},\n    }}\n}}"
    );
    writeln!(out, "{guarded}").unwrap();
    if split && prefix == "MPI_" {
        writeln!(
            out,
            "#[cold]\n#[inline(never)]\n#[allow(non_snake_case, unused_unsafe)]\n\
             unsafe fn traced_{name}({}) -> {ret} {{\n    let _trace = {};",
            params.join(", "),
            trace_hook(f)
        )
        .unwrap();
        writeln!(out, "{guarded}").unwrap();
    }
}

/// The `MADMPI_TRACE` hook of an implemented function: a guard that records the call (name,
/// duration; peer and tag for point-to-point calls) when it is dropped, as the wrapper returns.
/// When tracing is off it costs one relaxed load. Tracing starts inside `MPI_Init*` (whose start
/// time is therefore always taken) and the trace is written as `MPI_Finalize` returns.
fn trace_hook(f: &Decl) -> String {
    let name = &f.name;
    match name.as_str() {
        "MPI_Init" | "MPI_Init_thread" => return format!("::madmpi::trace::call_init({name:?})"),
        "MPI_Finalize" => return format!("::madmpi::trace::call_finalize({name:?})"),
        _ => {}
    }
    let int_param = |want: &str| {
        f.params.iter().find(|p| {
            p.name == want && p.ty.base == "int" && p.ty.stars == 0 && p.ty.dims.is_empty()
        })
    };
    match (
        int_param("dest").or_else(|| int_param("source")),
        int_param("tag"),
    ) {
        (Some(peer), Some(tag)) => format!(
            "::madmpi::trace::call_p2p({name:?}, {}, {})",
            peer.name, tag.name
        ),
        _ => format!("::madmpi::trace::call({name:?})"),
    }
}

// ----------------------------------------------------------------------------------------------
// coll_wrappers.rs
// ----------------------------------------------------------------------------------------------

/// The collectives whose wrappers `src/imp/coll/` leaves to the build: by base (blocking) name.
/// Each has one hand-written `fn <base>_impl(name, <arguments>, req, mode)` (`MPI_Bcast` →
/// `bcast_impl`) serving every form the table declares: the blocking one, `MPI_I*`,
/// `MPI_*_init`, and the large-count `_c` twin of each. A form `src/imp/` defines by hand
/// (`MPI_Barrier`, in `comm.rs`) is not generated.
const COLLECTIVES: &[&str] = &[
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Gather",
    "MPI_Gatherv",
    "MPI_Scatter",
    "MPI_Scatterv",
    "MPI_Allgather",
    "MPI_Allgatherv",
    "MPI_Alltoall",
    "MPI_Alltoallv",
    "MPI_Alltoallw",
    "MPI_Reduce",
    "MPI_Allreduce",
    "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block",
    "MPI_Scan",
    "MPI_Exscan",
    "MPI_Reduce_local",
    "MPI_Neighbor_allgather",
    "MPI_Neighbor_allgatherv",
    "MPI_Neighbor_alltoall",
    "MPI_Neighbor_alltoallv",
    "MPI_Neighbor_alltoallw",
];

/// `crate::imp::MPI_Xxx` for every form of the collectives above, in the order of the forms:
/// `pub unsafe fn` with the C signature, whose body is one call to the collective's `_impl`. The
/// arguments follow from the C types: `int` counts widen to `i64` (`MPI_Count` ones are already),
/// `int[]`/`MPI_Count[]` counts become `Cnts::I`/`Cnts::C`, `int[]`/`MPI_Aint[]` displacements
/// (named `*displs`) `Disp::I`/`Disp::A`, the `MPI_Info` of a persistent form is ignored (no
/// hints are used), and the request and mode come last (`NOREQ`, `Mode::Blocking` for the
/// blocking forms; a collective without non-blocking forms, `MPI_Reduce_local`, takes neither).
/// Returns the code and the names defined.
fn generate_coll_wrappers(
    table: &SignatureTable,
    hand_written: &BTreeSet<String>,
) -> (String, Vec<String>) {
    let decl = |name: &str| table.functions.iter().find(|f| f.name == name);
    let mut out = String::from(
        "// Generated by mpi-capi/build.rs (generate_coll_wrappers) from abi/mpi-abi-signatures.txt.\n\
         // Do not edit: the implementations are the `*_impl` functions of src/imp/coll/.\n",
    );
    let mut names = Vec::new();
    for base in COLLECTIVES {
        let base_decl = decl(base).unwrap_or_else(|| panic!("{base}: no signature"));
        let base_params: Vec<&str> = base_decl.params.iter().map(|p| p.name.as_str()).collect();
        let stem = &base["MPI_".len()..];
        let impl_fn = format!("{}_impl", stem.to_ascii_lowercase());
        let nonblocking = format!("MPI_I{}", stem.to_ascii_lowercase());
        let has_modes = decl(&nonblocking).is_some();
        let forms = [
            (base.to_string(), "Blocking", &[][..]),
            (nonblocking, "Nonblocking", &["request"][..]),
            (
                format!("{base}_init"),
                "Persistent",
                &["info", "request"][..],
            ),
        ];
        for (form, mode, added) in &forms {
            for name in [form.clone(), format!("{form}_c")] {
                let Some(f) = decl(&name) else { continue };
                // The forms differ from the base mechanically: the same parameters (with other
                // count types in `_c`), then the added ones.
                let expected: Vec<&str> = base_params.iter().chain(added.iter()).copied().collect();
                let actual: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
                assert!(
                    actual == expected,
                    "{name}: parameters {actual:?} are not those of {base} and {added:?}"
                );
                assert!(
                    returns_error_code(f) && !f.variadic,
                    "{name}: not a collective"
                );
                if hand_written.contains(&name) {
                    continue;
                }
                generate_coll_wrapper(&mut out, f, table, &impl_fn, has_modes.then_some(*mode));
                names.push(name);
            }
        }
    }
    (out, names)
}

fn generate_coll_wrapper(
    out: &mut String,
    f: &Decl,
    table: &SignatureTable,
    impl_fn: &str,
    mode: Option<&str>,
) {
    let mut args = vec![format!("{:?}", f.name)];
    let mut request = "NOREQ";
    let mut body = String::new();
    for p in &f.params {
        let (n, t) = (p.name.as_str(), &p.ty);
        let array = t.dims.len() == 1 && t.stars == 0;
        let scalar = t.dims.is_empty() && t.stars == 0;
        let arg = match t.base.as_str() {
            "MPI_Info" if scalar && n == "info" => {
                body.push_str("    let _ = info; // no hints are used\n");
                continue;
            }
            "MPI_Request" if t.stars == 1 && t.dims.is_empty() && n == "request" => {
                request = "request";
                continue;
            }
            "int" if scalar && n.ends_with("count") => format!("{n} as i64"),
            "int" if array && n.ends_with("displs") => format!("Disp::I({n})"),
            "int" if array && n.ends_with("counts") => format!("Cnts::I({n})"),
            "MPI_Aint" if array && n.ends_with("displs") => format!("Disp::A({n})"),
            "MPI_Count" if array && n.ends_with("counts") => format!("Cnts::C({n})"),
            "MPI_Count" if scalar && n.ends_with("count") => n.to_owned(),
            "int" | "MPI_Count" | "MPI_Aint"
                if !n.ends_with("count") && !n.ends_with("counts") && !n.ends_with("displs") =>
            {
                n.to_owned()
            }
            "int" | "MPI_Count" | "MPI_Aint" => panic!("{}: no rule for `{n}`", f.name),
            _ => n.to_owned(),
        };
        args.push(arg);
    }
    if let Some(mode) = mode {
        args.push(request.to_owned());
        args.push(format!("Mode::{mode}"));
    } else {
        assert!(request == "NOREQ", "{}: a request without modes", f.name);
    }
    write_wrapper(
        out,
        f,
        table,
        &format!("{body}    {impl_fn}({})", args.join(", ")),
    );
}

/// `pub unsafe fn <name>(<the C parameters>) -> c_int { <body> }`, the shape of every generated
/// wrapper (`body` is indented lines, the last one the call, without a newline).
fn write_wrapper(out: &mut String, f: &Decl, table: &SignatureTable, body: &str) {
    if f.params.len() > 7 {
        out.push_str("\n#[allow(clippy::too_many_arguments)]");
    }
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, rust_type(&p.ty, table, false)))
        .collect();
    writeln!(
        out,
        "\npub unsafe fn {}({}) -> c_int {{\n{body}\n}}",
        f.name,
        params.join(", ")
    )
    .unwrap();
}

// ----------------------------------------------------------------------------------------------
// io_wrappers.rs
// ----------------------------------------------------------------------------------------------

/// What the name of an MPI-IO data-access call says:
/// `MPI_File_[i]{read,write}[_at][_all|_shared|_ordered][_begin|_end][_c]`.
struct IoAccess {
    write: bool,
    /// The `Where` of `src/imp/io/calls.rs`: explicit offset, individual or shared pointer.
    place: &'static str,
    /// `_all` and `_ordered` are collective.
    collective: bool,
    form: IoForm,
}

#[derive(Clone, Copy, PartialEq)]
enum IoForm {
    Blocking,
    Nonblocking,
    Begin,
    End,
}

impl IoAccess {
    /// `None` for the other `MPI_File_*` functions.
    fn of(name: &str) -> Option<Self> {
        let rest = name.strip_prefix("MPI_File_")?;
        let rest = rest.strip_suffix("_c").unwrap_or(rest);
        let (rest, split) = match (rest.strip_suffix("_begin"), rest.strip_suffix("_end")) {
            (Some(r), _) => (r, Some(IoForm::Begin)),
            (_, Some(r)) => (r, Some(IoForm::End)),
            _ => (rest, None),
        };
        let (rest, nonblocking) = match rest.strip_prefix('i') {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let (write, rest) = match (rest.strip_prefix("read"), rest.strip_prefix("write")) {
            (Some(r), _) => (false, r),
            (_, Some(r)) => (true, r),
            _ => return None,
        };
        let (place, collective) = match rest {
            "" => ("Where::Indiv", false),
            "_all" => ("Where::Indiv", true),
            "_at" => ("Where::At(offset)", false),
            "_at_all" => ("Where::At(offset)", true),
            "_shared" => ("Where::Shared", false),
            "_ordered" => ("Where::Ordered", true),
            _ => return None,
        };
        let form = match (split, nonblocking) {
            (None, false) => IoForm::Blocking,
            (None, true) => IoForm::Nonblocking,
            (Some(form), false) => form,
            (Some(_), true) => panic!("{name}: a non-blocking split collective"),
        };
        assert!(
            collective || split.is_none(),
            "{name}: a split form of an independent call"
        );
        Some(IoAccess {
            write,
            place,
            collective,
            form,
        })
    }
}

/// `crate::imp::MPI_File_*` for every data-access call of the table (the forms of `IoAccess`,
/// and each `_c` twin), in the order of the table: `pub unsafe fn` with the C signature whose
/// body is one call to the hand-written helper of its form in `src/imp/io/`:
/// `calls::blocking(name, fh, buf, count, datatype, place, write, collective, status)`,
/// `nb::nonblocking(…, request)` in place of the status, `split::begin(name, fh, buf, count,
/// datatype, place, write)` (always collective) and `split::end(name, fh, write, status)` (the
/// buffer is not used). `int` counts widen to `i64`; `MPI_Count` ones already are. A form
/// `src/imp/` defines by hand is not generated. Returns the code and the names defined.
fn generate_io_wrappers(
    table: &SignatureTable,
    hand_written: &BTreeSet<String>,
) -> (String, Vec<String>) {
    let mut out = String::from(
        "// Generated by mpi-capi/build.rs (generate_io_wrappers) from abi/mpi-abi-signatures.txt.\n\
         // Do not edit: the implementations are the helpers of src/imp/io/{calls,nb,split}.rs.\n",
    );
    let mut names = Vec::new();
    for f in &table.functions {
        let Some(io) = IoAccess::of(&f.name) else {
            continue;
        };
        let name = &f.name;
        let large = name.ends_with("_c");
        // The parameters follow from the name: checked, so that the call below is right.
        let mut expected = vec![("fh", "MPI_File")];
        if io.form == IoForm::End {
            expected.push(("buf", "void"));
        } else {
            if io.place.starts_with("Where::At") {
                expected.push(("offset", "MPI_Offset"));
            }
            expected.push(("buf", "void"));
            expected.push(("count", if large { "MPI_Count" } else { "int" }));
            expected.push(("datatype", "MPI_Datatype"));
        }
        match io.form {
            IoForm::Blocking | IoForm::End => expected.push(("status", "MPI_Status")),
            IoForm::Nonblocking => expected.push(("request", "MPI_Request")),
            IoForm::Begin => {}
        }
        let actual: Vec<(&str, &str)> = f
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.ty.base.as_str()))
            .collect();
        assert!(
            actual == expected && returns_error_code(f) && !f.variadic,
            "{name}: parameters {actual:?}, expected {expected:?}"
        );
        assert!(
            f.params[f.params.iter().position(|p| p.name == "buf").unwrap()]
                .ty
                .konst
                == io.write,
            "{name}: the buffer of a write (only) is const"
        );
        if hand_written.contains(name) {
            continue;
        }
        let count = if large { "count" } else { "count as i64" };
        let (write, coll) = (io.write, io.collective);
        let body = match io.form {
            IoForm::Blocking => format!(
                "    calls::blocking({name:?}, fh, buf as *mut u8, {count}, datatype, {}, {write}, {coll}, status)",
                io.place
            ),
            IoForm::Nonblocking => format!(
                "    nb::nonblocking({name:?}, fh, buf as *mut u8, {count}, datatype, {}, {write}, {coll}, request)",
                io.place
            ),
            IoForm::Begin => format!(
                "    split::begin({name:?}, fh, buf as *mut u8, {count}, datatype, {}, {write})",
                io.place
            ),
            IoForm::End => {
                format!("    let _ = buf; // not used\n    split::end({name:?}, fh, {write}, status)")
            }
        };
        write_wrapper(&mut out, f, table, &body);
        names.push(name.clone());
    }
    (out, names)
}

// ----------------------------------------------------------------------------------------------
// part_wrappers.rs
// ----------------------------------------------------------------------------------------------

/// `crate::imp::MPI_Psend_init`, `MPI_Precv_init` and their `_c` twins (the same C signature:
/// the count is an `MPI_Count` in both), each one call to the hand-written
/// `part_init(name, send, <the C arguments>)` of `src/imp/part.rs`. A form `src/imp/` defines by
/// hand is not generated. Returns the code and the names defined.
fn generate_part_wrappers(
    table: &SignatureTable,
    hand_written: &BTreeSet<String>,
) -> (String, Vec<String>) {
    let mut out = String::from(
        "// Generated by mpi-capi/build.rs (generate_part_wrappers) from abi/mpi-abi-signatures.txt.\n\
         // Do not edit: the implementation is `part_init` of src/imp/part.rs.\n",
    );
    let mut names = Vec::new();
    for (base, send, peer) in [
        ("MPI_Psend_init", true, "dest"),
        ("MPI_Precv_init", false, "source"),
    ] {
        for name in [base.to_owned(), format!("{base}_c")] {
            let f = table
                .functions
                .iter()
                .find(|f| f.name == name)
                .unwrap_or_else(|| panic!("{name}: no signature"));
            let expected = [
                ("buf", "void"),
                ("partitions", "int"),
                ("count", "MPI_Count"),
                ("datatype", "MPI_Datatype"),
                (peer, "int"),
                ("tag", "int"),
                ("comm", "MPI_Comm"),
                ("info", "MPI_Info"),
                ("request", "MPI_Request"),
            ];
            let actual: Vec<(&str, &str)> = f
                .params
                .iter()
                .map(|p| (p.name.as_str(), p.ty.base.as_str()))
                .collect();
            assert!(
                actual == expected && returns_error_code(f) && !f.variadic,
                "{name}: parameters {actual:?}, expected {expected:?}"
            );
            if hand_written.contains(&name) {
                continue;
            }
            let args: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
            let body = format!("    part_init({name:?}, {send}, {})", args.join(", "));
            write_wrapper(&mut out, f, table, &body);
            names.push(name);
        }
    }
    (out, names)
}

// ----------------------------------------------------------------------------------------------
// abi_check.rs
// ----------------------------------------------------------------------------------------------

fn generate_abi_check(
    table: &SignatureTable,
    constants: &[Row],
    callback_constants: &[Row],
) -> String {
    let mut out = String::from(
        "// Generated by mpi-capi/build.rs from the ABI tables. Do not edit.\n\
         use super::*;\n\
         use std::os::raw::{c_char, c_int, c_void};\n\
         use std::mem::{offset_of, size_of};\n\n\
         const fn same<T>(x: T) -> T {\n    x\n}\n\
         const fn int(x: c_int) -> c_int {\n    x\n}\n\n\
         const _: () = assert!(size_of::<MPI_Status>() == 32);\n\
         const _: () = assert!(offset_of!(MPI_Status, MPI_SOURCE) == 0);\n\
         const _: () = assert!(offset_of!(MPI_Status, MPI_TAG) == 4);\n\
         const _: () = assert!(offset_of!(MPI_Status, MPI_ERROR) == 8);\n\
         const _: () = assert!(offset_of!(MPI_Status, MPI_internal) == 12);\n\
         const _: () = assert!(size_of::<MPI_Aint>() == size_of::<*mut c_void>());\n\
         const _: fn(MPI_Count) -> i64 = same;\n\
         const _: fn(MPI_Offset) -> i64 = same;\n\
         const _: fn(MPI_Fint) -> c_int = same;\n\n",
    );
    let mut runtime = Vec::new();
    for row in constants {
        let (n, v) = (&row.name, &row.value);
        match row.ty.as_str() {
            "handle-type" => {
                let target = row
                    .value
                    .strip_prefix("pointer to incomplete struct ")
                    .unwrap_or_else(|| panic!("{n}: unexpected `{}`", row.value));
                writeln!(out, "const _: fn({n}) -> *mut {target} = same;").unwrap();
            }
            "int" => writeln!(out, "const _: () = assert!(int({n}) == {v}, {n:?});").unwrap(),
            "MPI_Offset" => writeln!(
                out,
                "const _: () = assert!(same::<MPI_Offset>({n}) == {v}, {n:?});"
            )
            .unwrap(),
            "alias" => runtime.push(format!("({n:?}, {n} as usize, {v} as usize)")),
            ty => {
                let rust = c_spelling_to_rust(ty);
                writeln!(out, "const _: {rust} = {n};").unwrap();
                runtime.push(format!("({n:?}, {n} as usize, {v})"));
            }
        }
    }
    for row in callback_constants {
        let (n, v) = (&row.name, &row.value);
        assert!(
            table.is_callback(&row.ty),
            "{n}: unknown callback type {}",
            row.ty
        );
        writeln!(
            out,
            "const _: () = assert!(same::<usize>({n}) == {v}, {n:?});"
        )
        .unwrap();
    }
    out.push('\n');
    for cb in &table.callbacks {
        let params: Vec<String> = cb
            .params
            .iter()
            .map(|p| rust_type(&p.ty, table, false))
            .chain(cb.variadic.then(|| "...".to_owned()))
            .collect();
        let ret = if returns_void(cb) {
            String::new()
        } else {
            format!(" -> {}", rust_type(&cb.ret, table, true))
        };
        writeln!(
            out,
            "const _: fn({name}) -> Option<unsafe extern \"C\" fn({}){ret}> = same;",
            params.join(", "),
            name = cb.name
        )
        .unwrap();
    }
    writeln!(
        out,
        "\n#[test]\nfn predefined_pointers_match_the_table() {{\n    let cases: &[(&str, usize, usize)] = &[\n        {},\n    ];\n    for (name, actual, expected) in cases {{\n        assert_eq!(actual, expected, \"{{name}}\");\n    }}\n}}",
        runtime.join(",\n        ")
    )
    .unwrap();
    out
}

/// `void*`, `char***`, `MPI_Status*` or a handle type name, as a Rust type.
fn c_spelling_to_rust(ty: &str) -> String {
    let base = ty.trim_end_matches('*');
    let stars = ty.len() - base.len();
    let mut rust = match base {
        "void" => "c_void".to_owned(),
        "char" => "c_char".to_owned(),
        "int" => "c_int".to_owned(),
        other => other.to_owned(),
    };
    for _ in 0..stars {
        rust = format!("*mut {rust}");
    }
    rust
}

// ----------------------------------------------------------------------------------------------
// mpi.h
// ----------------------------------------------------------------------------------------------

fn generate_header(
    abi_rs: &Path,
    generated_rs: &Path,
    table: &SignatureTable,
    constants: &[Row],
    callback_constants: &[Row],
) -> String {
    let callback_names: Vec<String> = table.callbacks.iter().map(|c| c.name.clone()).collect();

    // Part 1: integer constants, scalar typedefs, handle typedefs and MPI_Status from abi.rs.
    // Everything that is not an `int` constant is written from the tables below instead.
    let mut config = base_config();
    config.style = cbindgen::Style::Both;
    config.documentation = true;
    config.export.item_types = vec![
        cbindgen::ItemType::Constants,
        cbindgen::ItemType::Typedefs,
        cbindgen::ItemType::Structs,
    ];
    let mut exclude: Vec<String> = constants
        .iter()
        .filter(|r| r.ty != "int" && r.ty != "handle-type")
        .map(|r| r.name.clone())
        .collect();
    exclude.extend(callback_constants.iter().map(|r| r.name.clone()));
    exclude.extend(callback_names.iter().cloned());
    for handle in constants.iter().filter(|r| r.ty == "handle-type") {
        let incomplete = handle.value["pointer to incomplete struct ".len()..].to_owned();
        // Declared by the typedef itself (`typedef struct MPI_ABI_Comm *MPI_Comm;`).
        config
            .export
            .rename
            .insert(incomplete.clone(), format!("struct {incomplete}"));
        exclude.push(incomplete);
    }
    config.export.exclude = exclude;
    // cbindgen emits the types functions use; this pass has no functions, so name them all.
    config.export.include = declared_types(&read(abi_rs));
    let types = run_cbindgen(config, abi_rs);

    // Part 2: the prototypes of generated.rs. Callback parameters read `MPI_User_function *`.
    let mut config = base_config();
    config.style = cbindgen::Style::Type;
    config.export.item_types = vec![cbindgen::ItemType::Functions];
    config.export.exclude = table
        .functions
        .iter()
        .filter(|f| f.variadic)
        .flat_map(|f| [f.name.clone(), format!("PMPI_{}", &f.name["MPI_".len()..])])
        .collect();
    for name in &callback_names {
        config
            .export
            .rename
            .insert(name.clone(), format!("{name} *"));
    }
    let mut prototypes = run_cbindgen(config, generated_rs);
    for name in &callback_names {
        // The rename above reads `MPI_User_function * user_fn`; the standard's spelling is tighter.
        prototypes = prototypes.replace(&format!("{name} * "), &format!("{name} *"));
    }

    let mut h = String::new();
    h.push_str(
        "/* mpi.h of madmpi: the C interface of libmadmpi, following the MPI-5.0 standard ABI.\n \
         *\n \
         * Generated by mpi-capi/build.rs (cbindgen over mpi-capi/src/abi.rs and the exported\n \
         * functions, plus the tables in mpi-capi/abi/). Do not edit: change those and rebuild. */\n\n\
         #ifndef MADMPI_MPI_H\n#define MADMPI_MPI_H\n\n\
         #include <stddef.h>\n#include <stdint.h>\n\n\
         #ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
    );
    writeln!(h, "#define MADMPI 1").unwrap();
    writeln!(
        h,
        "#define MADMPI_VERSION \"{}\"\n",
        env("CARGO_PKG_VERSION")
    )
    .unwrap();
    h.push_str(&types);

    h.push_str(
        "\n/* Predefined handles, special addresses and aliases (mpi-abi-constants.tsv) */\n\n",
    );
    for row in constants {
        let line = match row.ty.as_str() {
            "handle-type" | "int" => continue,
            "alias" => format!("#define {} {}", row.name, row.value),
            ty => format!(
                "#define {} (({}){})",
                row.name,
                c_spelling_with_space(ty),
                row.value
            ),
        };
        writeln!(h, "{line}").unwrap();
    }

    h.push_str("\n/* Callback function types (mpi-abi-signatures.txt) */\n\n");
    for cb in &table.callbacks {
        writeln!(h, "{}", cb.text).unwrap();
    }
    h.push_str("\n/* Predefined callbacks (mpi-abi-callbacks.tsv) */\n\n");
    for row in callback_constants {
        writeln!(h, "#define {} (({} *){})", row.name, row.ty, row.value).unwrap();
    }

    h.push_str("\n/* Functions; each also exists as PMPI_<name> for profiling tools */\n\n");
    h.push_str(&prototypes);
    let variadic: Vec<&Decl> = table.functions.iter().filter(|f| f.variadic).collect();
    if !variadic.is_empty() {
        h.push('\n');
    }
    for f in variadic {
        writeln!(h, "{}", f.text).unwrap();
        let pmpi = format!(" PMPI_{}(", &f.name["MPI_".len()..]);
        writeln!(h, "{}", f.text.replacen(&format!(" {}(", f.name), &pmpi, 1)).unwrap();
    }
    h.push_str("\n#ifdef __cplusplus\n} /* extern \"C\" */\n#endif\n\n#endif /* MADMPI_MPI_H */\n");
    h
}

/// Names of the `pub type` and `pub struct` items of a Rust source file.
fn declared_types(source: &str) -> Vec<String> {
    let code = strip_comments(source);
    let mut names = Vec::new();
    for keyword in ["pub type ", "pub struct "] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(keyword) {
            rest = &rest[at + keyword.len()..];
            let name: String = rest.chars().take_while(|c| is_word_char(*c)).collect();
            names.push(name);
        }
    }
    names
}

fn base_config() -> cbindgen::Config {
    let mut config = cbindgen::Config {
        language: cbindgen::Language::C,
        no_includes: true,
        documentation_style: cbindgen::DocumentationStyle::Doxy,
        line_length: 100,
        sort_by: cbindgen::SortKey::None,
        ..Default::default()
    };
    config.function.sort_by = Some(cbindgen::SortKey::None);
    config.constant.sort_by = Some(cbindgen::SortKey::None);
    config
}

fn run_cbindgen(config: cbindgen::Config, source: &Path) -> String {
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(source)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen on {}: {e}", source.display()));
    let mut bytes = Vec::new();
    bindings.write(&mut bytes);
    let text = String::from_utf8(bytes).expect("cbindgen writes UTF-8");
    // cbindgen separates items with blank lines: keep one between items, but none between two
    // `#define`s, so that the constants read as a table.
    let lines: Vec<&str> = text.trim().lines().map(str::trim_end).collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if line.is_empty() {
            let after = lines[i + 1..].iter().find(|l| !l.is_empty());
            let define_pair = out
                .trim_end()
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("#define"))
                && after.is_some_and(|l| l.starts_with("#define"));
            if out.ends_with("\n\n") || define_pair {
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `void*` → `void *`: the casts of the table in header style.
fn c_spelling_with_space(ty: &str) -> String {
    let base = ty.trim_end_matches('*');
    if base.len() == ty.len() {
        ty.to_owned()
    } else {
        format!("{base} {}", &ty[base.len()..])
    }
}

// ----------------------------------------------------------------------------------------------
// Files in the workspace
// ----------------------------------------------------------------------------------------------

fn unsupported_markdown(unsupported: &[&str], total: usize) -> String {
    let mut md = String::from(
        "# Unsupported MPI functions\n\n\
         <!-- Generated by mpi-capi/build.rs from the functions defined under mpi-capi/src/imp/. \
         Do not edit. -->\n\n\
         libmadmpi exports every function of the MPI-5.0 standard ABI (and its `PMPI_` twin). \
         The functions below have no implementation yet: they return \
         `MPI_ERR_UNSUPPORTED_OPERATION` (raised on the communicator argument, if any) with an \
         error string naming the function.\n\n",
    );
    writeln!(
        md,
        "{} of {total} functions are unsupported.\n",
        unsupported.len()
    )
    .unwrap();
    for name in unsupported {
        writeln!(md, "- `{name}`").unwrap();
    }
    md
}

/// Markers around the generated block of README.md.
const README_BEGIN: &str = "<!-- functions:begin (generated by mpi-capi/build.rs; do not edit) -->";
const README_END: &str = "<!-- functions:end -->";

fn readme_block(implemented: &[&str], unsupported: &[&str]) -> String {
    let mut md = String::new();
    writeln!(md, "{README_BEGIN}").unwrap();
    writeln!(
        md,
        "**Implemented: {} functions** (with their `PMPI_` twins; the `*_c2f`/`*_f2c`/`*_toint`/`*_fromint` \
         handle conversions included):\n",
        implemented.len()
    )
    .unwrap();
    writeln!(
        md,
        "{}\n",
        implemented
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
    .unwrap();
    writeln!(
        md,
        "<details><summary><b>Not implemented yet: {} functions</b> (they return \
         <code>MPI_ERR_UNSUPPORTED_OPERATION</code> naming the function)</summary>\n",
        unsupported.len()
    )
    .unwrap();
    writeln!(
        md,
        "{}\n",
        unsupported
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
    .unwrap();
    writeln!(md, "</details>").unwrap();
    write!(md, "{README_END}").unwrap();
    md
}

/// README.md with the block between the markers replaced by `block`; `None` without markers.
fn splice_readme(readme: &str, block: &str) -> Option<String> {
    let a = readme.find(README_BEGIN)?;
    let b = readme[a..].find(README_END)? + a + README_END.len();
    Some(format!("{}{}{}", &readme[..a], block, &readme[b..]))
}

fn write_if_changed(path: &Path, content: &str) {
    if fs::read_to_string(path).ok().as_deref() != Some(content) {
        fs::write(path, content).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

/// Writes a generated file of the workspace (committed, so a test can tell when it is stale):
/// only when its content changed, atomically, and without failing the build when the source tree
/// is read-only (the staleness test reports it then).
fn update_workspace_file(path: &Path, content: &str) {
    if fs::read_to_string(path).ok().as_deref() == Some(content) {
        return;
    }
    let result = (|| {
        let dir = path.parent().expect("a file in a directory");
        fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            path.file_name().unwrap().to_string_lossy(),
            std::process::id()
        ));
        fs::write(&tmp, content)?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        println!("cargo:warning=could not update {}: {e}", path.display());
    }
}
