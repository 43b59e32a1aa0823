//! The vocabulary every layer shares: the names of transports, APIs, outcomes and modes,
//! the parsed base URL, and the per-request record the driver fills and everything
//! downstream reads. It sits at the bottom of the crate and imports nothing of it, so any
//! module may use it without reaching up (see `tests/integration/architecture.rs`).
//!
//! * [`kinds`]: the shared enums, each spelled once with the `names!` macro.
//! * [`record`]: [`RequestRecord`] and [`SessionRecord`], and the metric definitions on them.
//! * [`url`]: [`BaseUrl`], a target's parsed `scheme://host[:port][/prefix]`.
//! * [`proxy`]: [`Proxy`], an HTTP proxy's parsed URL.
//! * [`redact`]: secrets (echoed keys, bearer tokens, URL credentials) out of recorded text.
//! * [`input`]: bounded reading of input files (line length, NUL bytes, file size, regular files).

pub mod input;
pub mod kinds;
pub mod proxy;
pub mod record;
pub mod redact;
pub mod url;

pub use kinds::*;
pub use proxy::*;
pub use record::*;
pub use url::*;

/// Declares a fieldless enum whose every variant has one name, written once: the name used
/// on the command line, in files and in tables. Generates the enum, `ALL` (the variants in
/// declaration order), `NAMES`, `as_str`, `Display`, `FromStr` (its error lists the names)
/// and serde's `Serialize`/`Deserialize` as that name. Written `value_enum enum …`, the enum
/// also derives `clap::ValueEnum` under the same names (variant docs become the help).
///
/// ```ignore
/// names! {
///     /// What a cell does about the server's prefix cache.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub value_enum enum CacheMode ("cache mode") {
///         /// Every prompt starts with a unique salt.
///         Cold = "cold",
///         /// The scenario's prompts verbatim.
///         AsIs = "as-is",
///     }
/// }
/// ```
macro_rules! names {
    (
        $(#[$meta:meta])*
        $vis:vis value_enum enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $crate::vocab::names! {
            @emit [$(#[$meta])* #[derive(clap::ValueEnum)]] $vis $name $what
            { $( [$(#[$vmeta])* #[value(name = $text)]] $variant = $text, )+ }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $crate::vocab::names! {
            @emit [$(#[$meta])*] $vis $name $what
            { $( [$(#[$vmeta])*] $variant = $text, )+ }
        }
    };
    (
        @emit [$($meta:tt)*] $vis:vis $name:ident $what:literal
        { $( [$($vmeta:tt)*] $variant:ident = $text:literal, )+ }
    ) => {
        $($meta)*
        $vis enum $name {
            $( $($vmeta)* $variant, )+
        }

        impl $name {
            /// Every variant, in declaration order (the order tables and charts show them).
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];
            /// Every variant's name, in declaration order.
            pub const NAMES: [&'static str; [$($text),+].len()] = [$($text),+];

            /// The name used on the command line, in files and in tables.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $name::ALL
                    .into_iter()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| {
                        format!(
                            "unknown {} {s:?}; use one of: {}",
                            $what,
                            $name::NAMES.join(", ")
                        )
                    })
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Visitor;
                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(f, "a {}: one of {}", $what, $name::NAMES.join(", "))
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        $name::ALL
                            .into_iter()
                            .find(|v| v.as_str() == s)
                            .ok_or_else(|| E::unknown_variant(s, &$name::NAMES))
                    }
                }
                d.deserialize_str(Visitor)
            }
        }
    };
}
pub(crate) use names;
