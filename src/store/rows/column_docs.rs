//! Test-only: reads the `csv_row!` declarations of `rows.rs` as text and renders each file's
//! column table for `docs/results.md`, so the documented columns cannot drift from the code.
//!
//! Owns: parsing a declaration's `columns { … }` block (doc comments, names, types) and the
//! Markdown table. Does not own: the columns themselves (`rows.rs`).

/// One declared column: its name, its Rust type and its doc comment joined into one line.
pub struct Declared {
    pub name: String,
    pub ty: String,
    pub doc: String,
}

/// The columns of the declaration whose column-list constant is `constant`, in order.
pub fn declared(source: &str, constant: &str) -> Vec<Declared> {
    let at = source
        .find(&format!("pub const {constant};"))
        .unwrap_or_else(|| panic!("no declaration of {constant}"));
    let rest = &source[at..];
    let open = rest.find("    columns {").expect("a columns block");
    let close = rest[open..]
        .find("    record_only")
        .expect("a record_only block")
        + open;
    let mut out = Vec::new();
    let mut doc: Vec<String> = Vec::new();
    for line in rest[open..close].lines().skip(1) {
        let line = line.trim();
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d.trim().to_string());
        } else if line.starts_with("#[") || line.is_empty() || line == "}" {
            continue;
        } else if let Some((name, after)) = line.split_once(':') {
            if !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                continue; // a continuation line of a derived column's expression
            }
            let ty = after.split('=').next().unwrap_or("").trim().to_string();
            out.push(Declared {
                name: name.to_string(),
                ty,
                doc: doc.join(" "),
            });
            doc.clear();
        }
    }
    out
}

/// What a column holds, in words a CSV reader (pandas, a spreadsheet) uses.
fn kind(ty: &str) -> String {
    let (inner, optional) = match ty.strip_prefix("Option<").and_then(|t| t.strip_suffix('>')) {
        Some(t) => (t, true),
        None => (ty, false),
    };
    let word = match inner {
        "u64" | "u32" | "u16" => "integer",
        "f64" => "number",
        "bool" => "`true`/`false`",
        _ => "text",
    };
    if optional {
        format!("{word}, or empty")
    } else {
        word.to_string()
    }
}

/// The Markdown table of `columns`; rustdoc link brackets around code spans are dropped.
pub fn table(columns: &[Declared]) -> String {
    let mut s = String::from("| column | holds | meaning |\n|---|---|---|\n");
    for c in columns {
        let doc = c
            .doc
            .replace("[`", "`")
            .replace("`]", "`")
            .replace('|', "\\|");
        s.push_str(&format!("| `{}` | {} | {} |\n", c.name, kind(&c.ty), doc));
    }
    s
}

/// `doc` with the generated block of `file` (between its two markers) replaced by `table`;
/// `None` when the markers are missing.
pub fn replace_block(doc: &str, file: &str, table: &str) -> Option<String> {
    let open = format!("<!-- generated: {file} -->\n");
    let close = "<!-- end generated -->";
    let start = doc.find(&open)? + open.len();
    let end = doc[start..].find(close)? + start;
    Some(format!("{}{}{}", &doc[..start], table, &doc[end..]))
}
