//! Static checks: the module's interfaces, constants and append descriptor against the C
//! header (no compiler needed).
use super::{read, Outcome};
use libtest_mimic::Completion;
use std::collections::{BTreeMap, BTreeSet};

/// The functions the C header declares (`srb_name(` outside comments and preprocessor lines).
fn header_functions() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in read("capi/include/sized_readback.h").lines() {
        let t = line.trim_start();
        if t.starts_with("//") || t.starts_with('#') || t.starts_with('*') || t.starts_with("/*") {
            continue;
        }
        let mut rest = t;
        while let Some(i) = rest.find("srb_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            if tail[end..].starts_with('(') {
                names.insert(tail[..end].to_string());
            }
            rest = &tail[end..];
        }
    }
    names
}

/// `(name, value)` pairs whose value is a number or the name of another pair: each name with
/// its number.
fn resolve(pairs: &[(String, String)]) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = pairs
        .iter()
        .filter_map(|(n, v)| Some((n.clone(), v.parse().ok()?)))
        .collect();
    for (n, v) in pairs {
        if let Some(&x) = out.get(v) {
            out.insert(n.clone(), x);
        }
    }
    out
}

/// The constants C sees: the header's `#define SRB_NAME value` constants (negative ones are in
/// parentheses; an alias names another constant), and the count kinds, `enum srb_count_kind`
/// of `sized_readback/slot.h`, which the header includes.
fn header_constants() -> BTreeMap<String, i64> {
    let mut pairs: Vec<(String, String)> = read("capi/include/sized_readback.h")
        .lines()
        .filter_map(|l| l.strip_prefix("#define SRB_"))
        .filter_map(|r| {
            let (name, value) = r.split_once(' ')?;
            let v = value.trim().trim_start_matches('(').trim_end_matches(')');
            Some((format!("SRB_{name}"), v.to_string()))
        })
        .collect();
    let slot = read("include/sized_readback/slot.h");
    let kinds = slot
        .split("enum srb_count_kind {")
        .nth(1)
        .and_then(|r| r.split("};").next())
        .expect("slot.h declares enum srb_count_kind");
    for l in kinds.lines() {
        if let Some((name, value)) = l.trim().trim_end_matches(',').split_once(" = ") {
            pairs.push((name.to_string(), value.to_string()));
        }
    }
    resolve(&pairs)
}

/// The module's source, lowercased, with `!` comments removed (no string in it holds a `!`).
fn module_code() -> String {
    read("capi/fortran/sized_readback.f90")
        .lines()
        .map(|l| l.split('!').next().unwrap_or("").to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The binding labels of the module's bind(c) interfaces.
fn module_bindings(code: &str) -> BTreeSet<String> {
    let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed
        .split("bind(c,name=")
        .skip(1)
        .filter_map(|r| {
            let q = r.chars().next()?;
            let r = &r[1..];
            Some(r[..r.find(q)?].to_string())
        })
        .collect()
}

/// Names made public by `public :: a, b` statements and `, public ::` declarations.
fn module_publics(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for l in code.lines() {
        let t = l.trim();
        if let Some(list) = t.strip_prefix("public ::") {
            names.extend(list.split(',').map(|n| n.trim().to_string()));
        } else if let Some((decl, rest)) = t.split_once("::") {
            if decl.contains(", public") {
                let name = rest.split(['=', '(']).next().unwrap_or("").trim();
                names.insert(name.to_string());
            }
        }
    }
    names
}

pub(crate) fn fortran_module_binds_every_c_function() -> Outcome {
    let functions = header_functions();
    assert!(
        functions.len() >= 23
            && functions.contains("srb_create")
            && functions.contains("srb_last_error"),
        "the header parse found only {functions:?}"
    );
    let code = module_code();
    let bound = module_bindings(&code);
    let missing: Vec<_> = functions.difference(&bound).collect();
    assert!(
        missing.is_empty(),
        "capi/fortran/sized_readback.f90 has no bind(c, name=\"...\") interface for {missing:?}"
    );
    let stale: Vec<_> = bound
        .iter()
        .filter(|b| b.starts_with("srb_") && !functions.contains(*b))
        .collect();
    assert!(
        stale.is_empty(),
        "the module binds {stale:?}, which the header does not declare"
    );
    // Under the C name, and public.
    let publics = module_publics(&code);
    for f in &functions {
        assert!(
            code.contains(&format!("function {f}(")) || code.contains(&format!("subroutine {f}(")),
            "{f}'s interface is not named {f}"
        );
        assert!(publics.contains(f), "{f} is not public in the module");
    }
    Ok(Completion::Completed)
}

pub(crate) fn fortran_module_has_every_c_constant() -> Outcome {
    let constants = header_constants();
    assert!(
        constants.len() >= 30,
        "the header parse found only {constants:?}"
    );
    let code = module_code();
    let mut pairs = Vec::new();
    for l in code.lines() {
        let Some((decl, rest)) = l.split_once("::") else {
            continue;
        };
        if !decl.contains("parameter") {
            continue;
        }
        if let Some((name, value)) = rest.split_once('=') {
            let (name, value) = (
                name.trim().to_ascii_uppercase(),
                value.trim().to_ascii_uppercase(),
            );
            // A number, or another parameter's name (srb_devptr, a kind parameter, is neither).
            let constant = value.parse::<i64>().is_ok() || value.starts_with("SRB_");
            if name.starts_with("SRB_") && constant {
                assert!(
                    decl.contains("integer(c_int)") && decl.contains("public"),
                    "{name} is not an integer(c_int), parameter, public: {l}"
                );
                pairs.push((name, value));
            }
        }
    }
    let found = resolve(&pairs);
    assert_eq!(
        found.len(),
        pairs.len(),
        "a parameter of the module has no value: {pairs:?}"
    );
    assert_eq!(
        found, constants,
        "the module's SRB_ parameters (left) differ from the header's constants (right)"
    );
    Ok(Completion::Completed)
}

/// `srb_append_desc`'s fields in `sized_readback/slot.h`: (name, bytes per element, elements).
pub(crate) fn c_append_desc() -> Vec<(String, usize, usize)> {
    let slot = read("include/sized_readback/slot.h");
    let body = slot
        .split("typedef struct srb_append_desc {")
        .nth(1)
        .and_then(|r| r.split("} srb_append_desc;").next())
        .expect("slot.h declares srb_append_desc");
    let mut fields = Vec::new();
    for l in body.lines() {
        let t = l.trim();
        let size = if t.starts_with("uint64_t ") {
            8
        } else if t.starts_with("uint32_t ") {
            4
        } else {
            assert!(
                t.is_empty() || t.starts_with("/*") || t.starts_with('*') || !t.ends_with(';'),
                "an srb_append_desc field of a type this test does not know: {t}"
            );
            continue;
        };
        let decl = t[9..].trim_end_matches(';').trim();
        let (name, n) = match decl.split_once('[') {
            Some((name, dim)) => {
                let dim = dim.trim_end_matches(']');
                let n = if dim == "SRB_MAX_COLUMNS" {
                    8
                } else {
                    dim.parse().expect("a dimension")
                };
                (name, n)
            }
            None => (decl, 1),
        };
        fields.push((name.to_string(), size, n));
    }
    fields
}

/// The module's `type, bind(c) :: srb_append_desc` fields, as `c_append_desc` gives C's.
pub(crate) fn fortran_append_desc() -> Vec<(String, usize, usize)> {
    let code = module_code();
    let body = code
        .split(":: srb_append_desc\n")
        .nth(1)
        .and_then(|r| r.split("end type srb_append_desc").next())
        .expect("the module declares type srb_append_desc");
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (kind, decl) = l.split_once("::").expect("a component declaration");
            let size = match kind.trim() {
                "integer(c_int64_t)" => 8,
                "integer(c_int32_t)" => 4,
                k => panic!("srb_append_desc component of kind {k}"),
            };
            let decl = decl.trim();
            let (name, n) = match decl.split_once('(') {
                Some((name, dim)) => {
                    let dim = dim.trim_end_matches(')');
                    let n = if dim == "srb_max_columns" {
                        8
                    } else {
                        dim.parse().expect("a dimension")
                    };
                    (name, n)
                }
                None => (decl, 1),
            };
            (name.to_string(), size, n)
        })
        .collect()
}

/// C's natural layout of the fields: each field's offset, and the size.
pub(crate) fn c_layout(fields: &[(String, usize, usize)]) -> (Vec<usize>, usize) {
    let mut off: usize = 0;
    let mut offsets = Vec::new();
    let mut align = 1;
    for (_, size, n) in fields {
        off = off.next_multiple_of(*size);
        offsets.push(off);
        off += size * n;
        align = align.max(*size);
    }
    (offsets, off.next_multiple_of(align))
}

pub(crate) fn fortran_append_desc_matches_slot_h() -> Outcome {
    let c = c_append_desc();
    let f = fortran_append_desc();
    assert_eq!(
        f, c,
        "the module's srb_append_desc (left) differs from slot.h's (right)"
    );
    let (_, size) = c_layout(&c);
    assert_eq!(
        size,
        std::mem::size_of::<srb::AppendDesc>(),
        "slot.h's srb_append_desc as this test lays it out differs from the library's"
    );
    Ok(Completion::Completed)
}
