//! Fails when include/metrale_gpu.h and src/lib.rs drift apart.
//!
//! Three checks: every function declared in the header is declared here and
//! nothing else is; every enumerator and numeric #define has the same value;
//! every struct has the same fields in the same order at the same offsets
//! and the same size, as the system C compiler (`cc`, or $CC) lays it out.

use metrale_gpu_sys::*;
use std::collections::{BTreeMap, BTreeSet};
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

/// This crate's folder: cargo sets CARGO_MANIFEST_DIR when it runs the
/// test; a test binary carried to another machine is given it by hand
/// (scripts/gpu-bindings-run.sh), else the build machine's path is used.
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The header to compare with, found once per test binary.
fn header_path() -> PathBuf {
    static FOUND: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let pkg_config = std::env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
            let path = locate_header(&manifest_dir(), &pkg_config).unwrap_or_else(|| {
                panic!(
                    "metrale_gpu.h not found: neither `{pkg_config} --variable=includedir metrale_gpu` nor its \
                     --cflags name a folder holding it, and {} has none (set PKG_CONFIG_PATH)",
                    manifest_dir().join("../../../include").display()
                )
            });
            eprintln!("header_drift: comparing with {}", path.display());
            path
        })
        .clone()
}

/// Where metrale_gpu.h is: the header of the library the crate links
/// (pkg-config's `includedir`, then each `-I` of `--cflags`) comes first,
/// so a crate vendored outside this repository checks the installed header;
/// the repository's `include/` is the fallback when pkg-config has none.
fn locate_header(manifest: &std::path::Path, pkg_config: &str) -> Option<PathBuf> {
    let ask = |args: &[&str]| -> Vec<PathBuf> {
        Command::new(pkg_config)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
            .split_whitespace()
            .map(|w| PathBuf::from(w.strip_prefix("-I").unwrap_or(w)))
            .collect()
    };
    let mut dirs = ask(&["--variable=includedir", "metrale_gpu"]);
    dirs.extend(ask(&["--cflags-only-I", "metrale_gpu"]));
    dirs.push(manifest.join("../../../include"));
    dirs.into_iter().map(|d| d.join("metrale_gpu.h")).find(|h| h.is_file())
}

/// A copy of the crate outside the repository (no ../../../include) still
/// finds the header through pkg-config, and the one it finds is this
/// repository's header (test.sh points PKG_CONFIG_PATH at this build).
#[test]
fn header_is_found_through_pkg_config_when_vendored() {
    let vendored = std::env::temp_dir().join("metrale-gpu-sys-vendored/a/b/c");
    std::fs::create_dir_all(&vendored).unwrap();
    assert!(!vendored.join("../../../include/metrale_gpu.h").exists());
    let pkg_config = std::env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let found = locate_header(&vendored, &pkg_config).expect("pkg-config names the include folder");
    let in_tree = manifest_dir().join("../../../include/metrale_gpu.h");
    if in_tree.is_file() {
        assert_eq!(read(&found), read(&in_tree), "pkg-config's header is not this repository's");
    }
    assert_eq!(locate_header(&vendored, "/nonexistent/pkg-config"), None, "no pkg-config, no in-tree header: none");
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn sys_source() -> String {
    read(&manifest_dir().join("src/lib.rs"))
}

/// The header with comments removed, split into preprocessor lines (with
/// continuations joined) and the remaining C text.
fn split_header(text: &str) -> (Vec<String>, String) {
    let mut stripped = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").expect("unterminated comment");
            stripped.push(' ');
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |n| &after[n..]);
        } else {
            let c = rest.chars().next().unwrap();
            stripped.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    let joined = stripped.replace("\\\n", " ");
    let (mut directives, mut code) = (Vec::new(), String::new());
    for line in joined.lines() {
        if line.trim_start().starts_with('#') {
            directives.push(line.trim().to_string());
        } else {
            code.push_str(line);
            code.push('\n');
        }
    }
    (directives, code)
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Identifiers with their byte positions.
fn identifiers(code: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    let mut pos = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == '_' {
            let start = pos;
            while i < bytes.len() && is_ident_char(bytes[i]) {
                pos += bytes[i].len_utf8();
                i += 1;
            }
            out.push((start, &code[start..pos]));
        } else {
            pos += c.len_utf8();
            i += 1;
        }
    }
    out
}

fn header_functions(code: &str) -> BTreeSet<String> {
    identifiers(code)
        .into_iter()
        .filter(|(pos, name)| {
            let after = code[pos + name.len()..].trim_start();
            // `(*` after a name is a function-pointer typedef's return type.
            let calls = after.strip_prefix('(').is_some_and(|rest| !rest.trim_start().starts_with('*'));
            name.starts_with("metrale_") && calls
        })
        .map(|(_, name)| name.to_string())
        .collect()
}

fn sys_functions(src: &str) -> BTreeSet<String> {
    src.split("pub fn ")
        .skip(1)
        .filter_map(|s| s.split('(').next())
        .map(|s| s.trim().to_string())
        .filter(|s| s.starts_with("metrale_"))
        .collect()
}

fn parse_int(text: &str) -> Option<u64> {
    let t = text.trim().trim_end_matches(['u', 'U', 'l', 'L']);
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

fn header_constants(directives: &[String], code: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for d in directives {
        let mut words = d.trim_start_matches('#').split_whitespace();
        if words.next() != Some("define") {
            continue;
        }
        if let (Some(name), Some(value), None) = (words.next(), words.next(), words.next()) {
            if let (true, Some(v)) = (name.starts_with("METRALE_") && !name.contains('('), parse_int(value)) {
                out.insert(name.to_string(), v);
            }
        }
    }
    for item in code.split([',', '{', '}']) {
        if let Some((name, value)) = item.split_once('=') {
            let name = name.trim();
            if name.starts_with("METRALE_") {
                out.insert(name.to_string(), parse_int(value).expect("enumerator value"));
            }
        }
    }
    out
}

fn sys_constants(src: &str) -> BTreeMap<String, u64> {
    src.lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let value = rest.split_once('=')?.1.trim().trim_end_matches(';');
            Some((name.trim().to_string(), parse_int(value)?))
        })
        .collect()
}

/// typedef name -> field names in order, for every `typedef struct x {...} x_t;`.
fn header_structs(code: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut rest = code;
    while let Some(at) = rest.find("typedef struct") {
        rest = &rest[at + "typedef struct".len()..];
        let semi = rest.find(';').unwrap_or(rest.len());
        let Some(open) = rest.find('{').filter(|&o| o < semi) else { continue };
        let close = rest.find('}').expect("struct body");
        let body = &rest[open + 1..close];
        let tail = &rest[close + 1..];
        let name = tail[..tail.find(';').unwrap()].trim().to_string();
        let mut fields = Vec::new();
        for decl in body.split(';').map(str::trim).filter(|d| !d.is_empty()) {
            let no_arrays: String = {
                let mut s = String::new();
                let mut depth = 0;
                for c in decl.chars() {
                    match c {
                        '[' => depth += 1,
                        ']' => depth -= 1,
                        _ if depth == 0 => s.push(c),
                        _ => {}
                    }
                }
                s
            };
            for part in no_arrays.split(',') {
                let ids = identifiers(part);
                fields.push(ids.last().expect("field name").1.to_string());
            }
        }
        out.insert(name, fields);
        rest = tail;
    }
    out
}

struct RustLayout {
    size: usize,
    fields: Vec<(&'static str, usize)>,
}

macro_rules! layouts {
    ($($ty:ident { $($field:ident),* $(,)? })*) => {{
        let mut m = BTreeMap::new();
        $(m.insert(stringify!($ty).to_string(), RustLayout {
            size: size_of::<$ty>(),
            fields: vec![$((stringify!($field), offset_of!($ty, $field))),*],
        });)*
        m
    }};
}

fn rust_layouts() -> BTreeMap<String, RustLayout> {
    layouts! {
        metrale_dim3_t { x, y, z }
        metrale_allocation_t { ptr, bytes, seq, file, line, kind, redzone_bytes }
        metrale_redzone_violation_t {
            ptr, bytes, seq, file, line, first_bad_offset, bad_bytes, expected, found
        }
        metrale_counters_t {
            struct_size, launches, graph_launches, stream_syncs, h2d_copies, h2d_bytes,
            d2h_copies, d2h_bytes, d2d_copies, d2d_bytes, memsets, memset_bytes, allocs,
            alloc_bytes, frees, free_bytes, kernel_lookups, kernel_lookup_misses,
            pinned_source_waits, timings_dropped
        }
        metrale_device_info_t { name, compute_major, compute_minor, sm_count, total_memory, backend, ordinal }
        metrale_trace_entry_t { kind, kernel, grid, block, shared_bytes, nargs, args }
        metrale_kernel_audit_entry_t { module, function, found, file, line }
        metrale_kernel_timing_t { kernel, launches, total_ms }
        metrale_context_options_t {
            struct_size, backend, device, redzone_bytes, redzone_min_index, checked_pointers,
            debug_sync, launch_trace, kernel_timing, trace_capacity, pool, quarantine_bytes,
            staging_threshold, staging_buffer_bytes, staging_buffers, staging_threads, pinned_pool
        }
        metrale_use_after_free_t {
            ptr, bytes, seq, alloc_file, alloc_line, free_file, free_line, first_bad_offset,
            bad_bytes, found
        }
        metrale_pool_stats_t {
            struct_size, enabled, reserved_bytes, in_use_bytes, requested_bytes, cached_bytes,
            peak_in_use_bytes, chunk_allocs, chunk_frees, largest_free_block, blocks_in_use,
            quarantined_bytes, pad_fills, pad_fills_skipped, pad_checks, pads_checked,
            pads_overwritten, pads_pending, pads_pending_bytes, pads_unlisted
        }
        metrale_host_kernel_call_t { grid, block, shared_bytes, params, args, args_bytes }
    }
}

/// Compiles and runs a C program printing "type size" and "type.field offset".
fn c_layouts(structs: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, usize> {
    let mut prog = String::from("#include <stdio.h>\n#include <stddef.h>\n#include \"metrale_gpu.h\"\nint main(void) {\n");
    for (ty, fields) in structs {
        prog += &format!("  printf(\"{ty} %zu\\n\", sizeof({ty}));\n");
        for f in fields {
            prog += &format!("  printf(\"{ty}.{f} %zu\\n\", offsetof({ty}, {f}));\n");
        }
    }
    prog += "  return 0;\n}\n";
    // CARGO_TARGET_TMPDIR is the build machine's; elsewhere use the system's.
    let build_tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let tmp = if build_tmp.is_dir() { build_tmp } else { std::env::temp_dir() };
    let dir = tmp.join("header_drift");
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, prog).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let include = header_path().parent().unwrap().to_path_buf();
    let status = Command::new(&cc)
        .arg("-I")
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` (set $CC): {e}"));
    assert!(status.success(), "`{cc}` failed to compile the layout probe");
    let out = Command::new(&exe).output().expect("run the layout probe");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn functions_match_the_header() {
    let (_, code) = split_header(&read(&header_path()));
    let header = header_functions(&code);
    let sys = sys_functions(&sys_source());
    assert!(header.len() > 70, "parsed only {} functions from the header", header.len());
    let missing: Vec<_> = header.difference(&sys).collect();
    let extra: Vec<_> = sys.difference(&header).collect();
    assert!(missing.is_empty(), "declared in the header, missing in metrale-gpu-sys: {missing:?}");
    assert!(extra.is_empty(), "declared in metrale-gpu-sys, not in the header: {extra:?}");
}

#[test]
fn constants_match_the_header() {
    let (directives, code) = split_header(&read(&header_path()));
    let header = header_constants(&directives, &code);
    let sys = sys_constants(&sys_source());
    assert!(header.len() > 30, "parsed only {} constants from the header", header.len());
    for (name, value) in &header {
        match sys.get(name) {
            None => panic!("{name} = {value} is in the header but not in metrale-gpu-sys"),
            Some(v) => assert_eq!(v, value, "{name}: header says {value}, metrale-gpu-sys says {v}"),
        }
    }
}

#[test]
fn struct_layouts_match_the_c_compiler() {
    let (_, code) = split_header(&read(&header_path()));
    let structs = header_structs(&code);
    let rust = rust_layouts();
    let header_names: BTreeSet<_> = structs.keys().collect();
    let rust_names: BTreeSet<_> = rust.keys().collect();
    assert_eq!(header_names, rust_names, "struct sets differ (header vs metrale-gpu-sys)");

    let c = c_layouts(&structs);
    for (ty, fields) in &structs {
        let r = &rust[ty];
        let rust_fields: Vec<_> = r.fields.iter().map(|(f, _)| f.to_string()).collect();
        assert_eq!(&rust_fields, fields, "{ty}: field list differs");
        assert_eq!(r.size, c[ty], "{ty}: size_of is {} in Rust, sizeof is {} in C", r.size, c[ty]);
        for (f, off) in &r.fields {
            let key = format!("{ty}.{f}");
            assert_eq!(*off, c[&key], "{key}: offset {off} in Rust, {} in C", c[&key]);
        }
    }
}
