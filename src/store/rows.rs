//! CSV row types: `requests.csv`, `chunks.csv`, `sessions.csv`, each declared once with
//! `csv_row!`: one line per column gives its name, type, doc (the column doc), serde
//! attributes and how it is written from the record; the row type, the column list and both
//! conversions are generated from that line.
//!
//! Owns: the columns and their order, the conversions between records and rows, and
//! `shift_instants!` (the instant columns moved onto another time axis).
//! Does not own: the files (see `writer`, `reader`, `merge_rows`).

use serde::{Deserialize, Serialize};

use crate::vocab::{
    Chaining, Chunk, OutcomeKind, OverheadSource, RequestKind, RequestRecord, ServerTiming,
    SessionRecord, TokenSource, TransportKind, WireProtocol,
};

/// Declares one CSV file's row type from a single list of its columns, and generates:
///
/// * the row struct (each column a field, with its doc and serde attributes, in order),
/// * the column-name constant (the header, in the same order),
/// * the record → row conversion: `impl From<&Record> for Row` (`write |r| …`), or a named
///   constructor with extra arguments (`write new |c, extra: T| …`),
/// * the row → record conversion `Row::into_record` (`read |row, extra: T| …`).
///
/// Each column is `name: Type = how,` where `how` is `copy` (the record's field of the same
/// name, cloned on write and moved back on read) or `(expr)` (derived: written from `expr`,
/// which may use the `write` block's bindings; not read back). `record_only` gives the
/// record's fields that are not `copy` columns, built from the row's fields (moved out of
/// the `read` binding) and the `read` block's bindings. The record is built with a struct
/// literal, so a record field that is neither a `copy` column nor in `record_only` is a
/// compile error.
///
/// Adding a scalar column to `requests.csv`: the field in `RequestRecord` and one
/// `name: Type = copy,` line here (plus its row in the README's column table, which a test
/// checks).
macro_rules! csv_row {
    (
        $(#[$meta:meta])*
        $vis:vis struct $row:ident;
        $(#[$cmeta:meta])*
        $cvis:vis const $columns:ident;
        record $record:ident;
        $(#[$wmeta:meta])*
        write $($wfn:ident)? |$r:ident $(, $warg:ident : $wty:ty)*| { $($wpre:tt)* }
        $(#[$rmeta:meta])*
        read |$s:ident $(, $rarg:ident : $rty:ty)*| { $($rpre:tt)* }
        columns {
            $( $(#[$fmeta:meta])* $col:ident : $ty:ty = $how:tt, )+
        }
        record_only { $( $extra:ident : $eexpr:expr, )* }
    ) => {
        $(#[$meta])*
        $vis struct $row {
            $( $(#[$fmeta])* pub $col: $ty, )+
        }

        $(#[$cmeta])*
        $cvis const $columns: &[&str] = &[$(stringify!($col)),+];

        csv_row! {
            @write [$($wfn)?] $(#[$wmeta])* $row $record |$r $(, $warg: $wty)*| { $($wpre)* }
            { $($col $how)+ }
        }

        impl $row {
            $(#[$rmeta])*
            pub fn into_record(self $(, $rarg: $rty)*) -> $record {
                let $s = self;
                $($rpre)*
                csv_row!(@into $record $s [] [$($extra: $eexpr,)*] $($col $how)+)
            }
        }
    };

    // The record → row conversion: `From` without a name, a constructor with one.
    (
        @write [] $(#[$wmeta:meta])* $row:ident $record:ident |$r:ident| { $($wpre:tt)* }
        { $($col:ident $how:tt)+ }
    ) => {
        impl From<&$record> for $row {
            $(#[$wmeta])*
            fn from($r: &$record) -> Self {
                $($wpre)*
                $row { $( $col: csv_row!(@get $r $col $how), )+ }
            }
        }
    };
    (
        @write [$wfn:ident] $(#[$wmeta:meta])* $row:ident $record:ident
        |$r:ident $(, $warg:ident : $wty:ty)*| { $($wpre:tt)* }
        { $($col:ident $how:tt)+ }
    ) => {
        impl $row {
            $(#[$wmeta])*
            pub fn $wfn($r: &$record $(, $warg: $wty)*) -> Self {
                $($wpre)*
                $row { $( $col: csv_row!(@get $r $col $how), )+ }
            }
        }
    };

    // One column's value on write.
    (@get $r:ident $col:ident copy) => { ::std::clone::Clone::clone(&$r.$col) };
    (@get $r:ident $col:ident ($e:expr)) => { $e };

    // The record on read: `copy` columns moved back, derived ones dropped, then `record_only`.
    (@into $record:ident $s:ident [$($done:tt)*] [$($extra:tt)*]) => {
        $record { $($done)* $($extra)* }
    };
    (@into $record:ident $s:ident [$($done:tt)*] [$($extra:tt)*] $col:ident copy $($rest:tt)*) => {
        csv_row!(@into $record $s [$($done)* $col: $s.$col,] [$($extra)*] $($rest)*)
    };
    (@into $record:ident $s:ident [$($done:tt)*] [$($extra:tt)*] $col:ident ($($e:tt)*) $($rest:tt)*) => {
        csv_row!(@into $record $s [$($done)*] [$($extra)*] $($rest)*)
    };
}

/// Moves a request's instants (ns since its run started) `offset_ns` later, onto another
/// axis (the merged one of `merge`): `intended_ns`, `dispatch_ns` and the optional phase
/// instants from `request_written_ns` to `end_ns`. A macro because two types with these
/// fields are moved alike: a [`RequestRow`] streamed into the merged `requests.csv` and a
/// [`RequestRecord`] of a sampled session's timeline.
macro_rules! shift_instants {
    ($request:expr, $offset_ns:expr) => {{
        let offset_ns: u64 = $offset_ns;
        let r = &mut $request;
        let at = |v: u64| v + offset_ns;
        r.intended_ns = at(r.intended_ns);
        r.dispatch_ns = at(r.dispatch_ns);
        for v in [
            &mut r.request_written_ns,
            &mut r.response_headers_ns,
            &mut r.first_event_ns,
            &mut r.first_token_ns,
            &mut r.last_token_ns,
            &mut r.end_ns,
        ] {
            *v = v.map(at);
        }
    }};
}
pub(super) use shift_instants;

csv_row! {
    /// One row of `requests.csv`: every scalar field of [`RequestRecord`] (times in ns since
    /// run start, durations in ns; empty cells for "none"), the flattened server timing, and
    /// derived columns. Chunks are in `chunks.csv`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct RequestRow;
    /// The columns of `requests.csv`, in order (the fields of [`RequestRow`]).
    pub const REQUEST_COLUMNS;
    record RequestRecord;
    write |r| {
        let st = r.server_timing.as_ref();
        let overhead = r.overhead_ns();
    }
    /// Rebuilds the record from this row and its chunks (from `chunks.csv`), dropping the
    /// derived columns. A server timing with an empty source and no values reads back as
    /// `None` (CSV cannot tell them apart).
    read |row, chunks: Vec<Chunk>| {
        let any_timing = row.server_timing_source.is_some()
            || row.server_ttft_ms.is_some()
            || row.server_total_ms.is_some()
            || row.server_api_overhead_ms.is_some()
            || row.server_queue_ms.is_some();
    }
    columns {
        /// Sequence number in the run (dispatch order).
        id: u64 = copy,
        /// Target name.
        target: String = copy,
        /// Transport name.
        transport: TransportKind = copy,
        /// Session index within its cell.
        session: u32 = copy,
        /// The scenario turn the request belongs to (the same on every transport).
        turn: u32 = copy,
        /// Request index within its session (every request counted; absent in older runs).
        #[serde(default)]
        request: u32 = copy,
        /// Request index within its turn (0 = the user's request or a warm-up; absent in
        /// older runs).
        #[serde(default)]
        step: u32 = copy,
        /// `user`, `tool-result` or `warmup`.
        kind: RequestKind = copy,
        /// True for warm-up sessions (excluded from statistics).
        warmup: bool = copy,
        /// `full-history` or `previous-response-id`.
        chaining: Chaining = copy,
        /// Server response id.
        response_id: Option<String> = copy,
        /// Intended send time (coordinated-omission origin), ns.
        intended_ns: u64 = copy,
        /// Dispatch time, ns.
        dispatch_ns: u64 = copy,
        /// DNS duration, ns.
        dns_ns: Option<u64> = copy,
        /// TCP connect duration, ns (empty on a reused connection).
        tcp_connect_ns: Option<u64> = copy,
        /// Proxy `CONNECT` tunnel duration, ns (empty without a proxy or on a reused
        /// connection; absent in older runs).
        #[serde(default)]
        proxy_connect_ns: Option<u64> = copy,
        /// TLS handshake duration, ns.
        tls_handshake_ns: Option<u64> = copy,
        /// WebSocket upgrade duration, ns.
        ws_upgrade_ns: Option<u64> = copy,
        /// Request fully written, ns.
        request_written_ns: Option<u64> = copy,
        /// Response headers received, ns.
        response_headers_ns: Option<u64> = copy,
        /// First protocol event, ns.
        first_event_ns: Option<u64> = copy,
        /// First content token, ns.
        first_token_ns: Option<u64> = copy,
        /// Last content token, ns.
        last_token_ns: Option<u64> = copy,
        /// Terminal event or close, ns.
        end_ns: Option<u64> = copy,
        /// Ran on a connection opened earlier.
        connection_reused: bool = copy,
        /// Connection id within the run.
        connection_id: u64 = copy,
        /// Times the request was re-sent on a fresh connection (absent in older runs).
        #[serde(default)]
        reconnects: u32 = copy,
        /// `HTTP/1.1`, `HTTP/2` or `WebSocket`.
        protocol: WireProtocol = copy,
        /// Negotiated ALPN.
        alpn: Option<String> = copy,
        /// Request bytes written.
        bytes_sent: u64 = copy,
        /// Response bytes read.
        bytes_received: u64 = copy,
        /// Input tokens (server usage).
        input_tokens: Option<u32> = copy,
        /// Cached input tokens (server usage).
        cached_input_tokens: Option<u32> = copy,
        /// Output tokens.
        output_tokens: u32 = copy,
        /// `server-usage` or `chunk-count`.
        token_source: TokenSource = copy,
        /// Tool calls the model made.
        tool_calls: u32 = copy,
        /// Server timing source (`websocket-timing`, `openai-processing-ms`, …); empty when
        /// the server reported none.
        server_timing_source: Option<String> = (st.map(|s| s.source.clone())),
        /// Server TTFT, ms.
        server_ttft_ms: Option<f64> = (st.and_then(|s| s.ttft_ms)),
        /// Server total time, ms.
        server_total_ms: Option<f64> = (st.and_then(|s| s.total_ms)),
        /// Server API overhead outside the engine, ms.
        server_api_overhead_ms: Option<f64> = (st.and_then(|s| s.api_overhead_ms)),
        /// Server queueing, ms.
        server_queue_ms: Option<f64> = (st.and_then(|s| s.queue_ms)),
        /// `ok`, `http-status`, `connect-error`, `tls-error`, `upgrade-error`, `timeout`,
        /// `truncated`, `stale-connection`, `server-error`, `protocol-error`, `cancelled`.
        outcome: OutcomeKind = copy,
        /// HTTP status when not 2xx.
        http_status: Option<u16> = copy,
        /// Failure detail.
        error: Option<String> = copy,
        /// Derived: TTFT from the intended start, ns.
        ttft_ns: Option<u64> = (r.ttft_ns()),
        /// Derived: end-to-end latency from the intended start, ns.
        e2e_ns: Option<u64> = (r.e2e_ns()),
        /// Derived: time per output token after the first, ns (fractional).
        tpot_ns: Option<f64> = (r.tpot_ns()),
        /// Derived: round-trip overhead, ns.
        overhead_ns: Option<u64> = (overhead.map(|(o, _)| o)),
        /// Derived: `server-timing` or `first-event-estimate`.
        overhead_source: Option<OverheadSource> = (overhead.map(|(_, s)| s)),
        /// Derived: number of content chunks (rows in `chunks.csv`).
        chunk_count: u32 =
            (u32::try_from(r.chunks.len() as u64 + r.chunks_dropped).unwrap_or(u32::MAX)),
        /// The shard (`run --shard I/N`) that sent the request; empty for an unsharded run
        /// (and in older runs). After `merge`, every row names its shard.
        #[serde(default)]
        shard: Option<u32> = (None),
    }
    record_only {
        chunks: chunks,
        server_timing: any_timing.then(|| ServerTiming {
            source: row.server_timing_source.unwrap_or_default(),
            ttft_ms: row.server_ttft_ms,
            total_ms: row.server_total_ms,
            api_overhead_ms: row.server_api_overhead_ms,
            queue_ms: row.server_queue_ms,
        }),
        // Not a column: the run's `harness` section in `summary.json` keeps what it meant.
        slot_wait_ns: None,
        chunks_dropped: 0,
    }
}

csv_row! {
    /// One row of `chunks.csv`: one content chunk of one request.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct ChunkRow;
    /// The columns of `chunks.csv`, in order (the fields of [`ChunkRow`]).
    pub const CHUNK_COLUMNS;
    record Chunk;
    /// The row of chunk `c`, the `index`th (0-based) of request `request_id`.
    write new |c, request_id: u64, index: u32| {}
    /// The chunk.
    read |row| {}
    columns {
        /// `requests.csv` `id`.
        request_id: u64 = (request_id),
        /// Position within the request (0-based).
        index: u32 = (index),
        /// Arrival, ns since run start.
        at_ns: u64 = copy,
        /// Tokens in the chunk.
        tokens: u32 = copy,
        /// UTF-8 bytes of the chunk's text.
        text_bytes: u32 = copy,
    }
    record_only {}
}

csv_row! {
    /// One row of `sessions.csv`: a [`SessionRecord`] plus its wall time.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct SessionRow;
    /// The columns of `sessions.csv`, in order (the fields of [`SessionRow`]).
    pub const SESSION_COLUMNS;
    record SessionRecord;
    write |s| {}
    /// The record.
    read |row| {}
    columns {
        /// Target name.
        target: String = copy,
        /// Transport name.
        transport: TransportKind = copy,
        /// Session index within its cell.
        session: u32 = copy,
        /// Warm-up session (excluded from statistics).
        warmup: bool = copy,
        /// Intended start of the first request, ns since run start.
        start_ns: u64 = copy,
        /// End of the last request, ns since run start.
        end_ns: u64 = copy,
        /// Requests sent.
        requests: u32 = copy,
        /// Requests that did not end `ok`.
        failed: u32 = copy,
        /// Stopped by Ctrl-C before its last turn (excluded from session wall time).
        #[serde(default)]
        interrupted: bool = copy,
        /// Derived: `end_ns − start_ns`.
        wall_ns: u64 = (s.end_ns.saturating_sub(s.start_ns)),
        /// The shard that ran the session (see [`RequestRow::shard`]).
        #[serde(default)]
        shard: Option<u32> = (None),
    }
    record_only {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_of<T: Serialize>(row: T) -> String {
        let mut w = csv::WriterBuilder::new()
            .has_headers(true)
            .from_writer(Vec::new());
        w.serialize(row).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        text.lines().next().unwrap().to_string()
    }

    #[test]
    fn every_requests_column_is_documented_in_the_readme() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        let section = readme
            .split("### `requests.csv` columns")
            .nth(1)
            .expect("README has a requests.csv columns section");
        let section = section.split("\n#").next().unwrap_or(section);
        let documented: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| "))
            .filter_map(|l| l.split(" | ").next())
            .collect();
        for c in REQUEST_COLUMNS {
            let name = format!("`{c}`");
            assert!(
                documented.iter().any(|d| d.split(", ").any(|n| n == name)),
                "README does not document the requests.csv column {name}"
            );
        }
    }

    #[test]
    fn column_lists_match_the_row_types() {
        assert_eq!(
            header_of(RequestRow::from(&RequestRecord::default())),
            REQUEST_COLUMNS.join(",")
        );
        assert_eq!(
            header_of(ChunkRow::new(
                &Chunk {
                    at_ns: 0,
                    tokens: 0,
                    text_bytes: 0
                },
                0,
                0
            )),
            CHUNK_COLUMNS.join(",")
        );
        assert_eq!(
            header_of(SessionRow::from(&SessionRecord::default())),
            SESSION_COLUMNS.join(",")
        );
    }
}
