//! Colours, number formatting and text escaping shared by every renderer.
//!
//! Owns: the transport palette (the same colour for a transport in every chart and table),
//! the phase palette, and how numbers and changes are printed.
//! Does not own: layout (see `charts`, `markdown`, `html`).

use plotters::style::RGBColor;

/// Okabe–Ito colours (Okabe & Ito 2008), chosen to stay distinguishable under the common
/// colour-vision deficiencies. Each transport always gets the same one.
pub const TRANSPORT_COLOURS: [(&str, RGBColor); 4] = [
    ("http", RGBColor(0xD5, 0x5E, 0x00)),        // vermillion
    ("http-pooled", RGBColor(0x00, 0x9E, 0x73)), // bluish green
    ("http2", RGBColor(0xCC, 0x79, 0xA7)),       // reddish purple
    ("ws", RGBColor(0x00, 0x72, 0xB2)),          // blue
];

/// Colour for a transport not in [`TRANSPORT_COLOURS`] (a newer version's transport).
pub const OTHER_COLOUR: RGBColor = RGBColor(0x55, 0x55, 0x55);

/// The colour of a transport, in every chart.
pub fn transport_colour(transport: &str) -> RGBColor {
    TRANSPORT_COLOURS
        .iter()
        .find(|(t, _)| *t == transport)
        .map_or(OTHER_COLOUR, |(_, c)| *c)
}

/// Sort key that puts transports in the documented order (http, http-pooled, http2, ws),
/// unknown ones after them by name.
pub fn transport_rank(transport: &str) -> (usize, String) {
    let i = TRANSPORT_COLOURS
        .iter()
        .position(|(t, _)| *t == transport)
        .unwrap_or(TRANSPORT_COLOURS.len());
    (i, transport.to_string())
}

/// Waterfall phase labels and colours, in wire order (matches `Metric::PHASES`). A separate
/// palette from the transports: in the waterfall, rows are transports and colours are phases.
pub const PHASE_STYLE: [(&str, RGBColor); 8] = [
    ("DNS", RGBColor(0x88, 0xCC, 0xEE)),
    ("TCP", RGBColor(0x44, 0xAA, 0x99)),
    ("TLS", RGBColor(0x11, 0x77, 0x33)),
    ("WS upgrade", RGBColor(0x99, 0x99, 0x33)),
    ("request write", RGBColor(0xDD, 0xCC, 0x77)),
    ("TTFB", RGBColor(0xCC, 0x66, 0x77)),
    ("first token", RGBColor(0x88, 0x22, 0x55)),
    ("decode", RGBColor(0xAA, 0xAA, 0xAA)),
];

/// `#RRGGBB`.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// A value in milliseconds for tables: `0.83 ms`, `41.2 ms`, `812 ms`, `9.10 s`.
pub fn ms(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} s", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else {
        format!("{} ms", num(v))
    }
}

/// Three significant-ish figures: `0.83`, `41.2`, `1234`.
pub fn num(v: f64) -> String {
    crate::recorder::summary::num(v)
}

/// Escapes text for HTML element content and attribute values.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Escapes text for a GitHub-flavoured Markdown table cell or paragraph: no raw HTML, no
/// table breaks, no accidental emphasis or code spans, one line.
pub fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_formats() {
        assert_eq!(
            html_escape("<script>alert('x')</script>&"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;"
        );
        assert_eq!(md_escape("a|b <i>\n`c`"), "a\\|b &lt;i&gt; \\`c\\`");
        assert_eq!(ms(0.834), "0.83 ms");
        assert_eq!(ms(41.23), "41.2 ms");
        assert_eq!(ms(9100.0), "9.10 s");
        assert_eq!(ms(43_210.0), "43.2 s");
        assert_eq!(hex(transport_colour("ws")), "#0072B2");
        assert_eq!(transport_colour("carrier-pigeon"), OTHER_COLOUR);
        let mut t = vec!["ws", "zz", "http2", "http", "http-pooled"];
        t.sort_by_key(|t| transport_rank(t));
        assert_eq!(t, vec!["http", "http-pooled", "http2", "ws", "zz"]);
    }
}
