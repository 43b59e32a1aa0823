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
/// `name: Type = copy,` line here (its doc comment is the column's row in docs/results.md, which a test regenerates).
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
        // Milliseconds to the nanosecond, without binary float noise.
        let ms = |v: f64| crate::units::round_decimals(v, 6);
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
        /// The request's sequence number in the run (dispatch order); `chunks.csv` refers to it.
        id: u64 = copy,
        /// Target name (`sim-wafer`, `openai`, …).
        target: String = copy,
        /// `http`, `http-pooled`, `http2` or `ws`.
        transport: TransportKind = copy,
        /// Session index within its target × transport cell.
        session: u32 = copy,
        /// The scenario turn the request belongs to (0-based, after `repeat`); a WebSocket warm-up
        /// and an agent loop's tool-result requests carry the turn they serve.
        turn: u32 = copy,
        /// Request index within its session (0-based, counting every request: warm-ups and tool
        /// results too).
        #[serde(default)]
        request: u32 = copy,
        /// Request index within its turn: 0 for the user's request (and a warm-up), 1, 2, … for the
        /// tool-result requests that follow it. Leaving out `kind = warmup` rows, (`session`,
        /// `turn`, `step`) names the same request on every transport, so rows join across
        /// transports on it (a failed request ends its turn early, so one transport can have fewer
        /// steps).
        #[serde(default)]
        step: u32 = copy,
        /// `user` (a prompt), `tool-result` (tool outputs sent back in an agent loop) or `warmup`
        /// (a `generate: false` request on a fresh WebSocket, no output).
        kind: RequestKind = copy,
        /// `true` for requests of a warm-up *session* (`[load] warmup_sessions`): recorded, kept
        /// out of the statistics. Not the same as `kind = warmup`.
        warmup: bool = copy,
        /// How history was sent: `full-history` or `previous-response-id`.
        chaining: Chaining = copy,
        /// The server's response id.
        response_id: Option<String> = copy,
        /// Instant: when the request should have been sent (the schedule; latencies count from
        /// here, so a late start is not hidden).
        intended_ns: u64 = copy,
        /// Instant: when it was actually started.
        dispatch_ns: u64 = copy,
        /// Duration: DNS resolution, of the proxy's name when the connection went through one
        /// (empty for IP literals and on a reused connection).
        dns_ns: Option<u64> = copy,
        /// Duration: TCP connect, to the proxy when the connection went through one (empty on a
        /// reused connection).
        tcp_connect_ns: Option<u64> = copy,
        /// Duration: the HTTP proxy's `CONNECT` tunnel (request written to `200` read), when the
        /// connection went through a proxy (`HTTPS_PROXY` / `HTTP_PROXY`, or the target's `proxy`);
        /// empty otherwise and on a reused connection.
        #[serde(default)]
        proxy_connect_ns: Option<u64> = copy,
        /// Duration: TLS handshake.
        tls_handshake_ns: Option<u64> = copy,
        /// Duration: WebSocket upgrade, on the request that paid it.
        ws_upgrade_ns: Option<u64> = copy,
        /// Instant: the request's last byte written.
        request_written_ns: Option<u64> = copy,
        /// Instant: the response head arrived (HTTP).
        response_headers_ns: Option<u64> = copy,
        /// Instant: the first protocol event arrived (`response.created`, the role chunk).
        first_event_ns: Option<u64> = copy,
        /// Instant: the first content chunk arrived.
        first_token_ns: Option<u64> = copy,
        /// Instant: the last content chunk arrived.
        last_token_ns: Option<u64> = copy,
        /// Instant: the terminal event, the close or the failure.
        end_ns: Option<u64> = copy,
        /// The request ran on a connection opened earlier.
        connection_reused: bool = copy,
        /// Connection number within the run.
        connection_id: u64 = copy,
        /// How many times the request was sent again on a fresh connection because the reused
        /// connection it was first written to had been closed by the server with proof that no
        /// server application read it: the connection was reset under it, hyper handed it back
        /// unwritten (e.g. after an HTTP/2 GOAWAY), or HTTP/2 `REFUSED_STREAM`. The phases on the
        /// row are the fresh connection's; the request is counted once. A connection found closed
        /// *before* sending (an idle keep-alive connection the server closed, `Connection: close`,
        /// an expired `Keep-Alive: timeout`, a WebSocket closed between turns) is simply not used:
        /// the request runs on a new connection (`connection_reused = false`) with `reconnects =
        /// 0`.
        #[serde(default)]
        reconnects: u32 = copy,
        /// `HTTP/1.1`, `HTTP/2` or `WebSocket`.
        protocol: WireProtocol = copy,
        /// The protocol TLS negotiated.
        alpn: Option<String> = copy,
        /// Request bytes on the wire for this request: headers + body, or WebSocket payloads.
        bytes_sent: u64 = copy,
        /// Response bytes on the wire for this request: headers + body, or WebSocket payloads.
        bytes_received: u64 = copy,
        /// Input tokens, from the server's usage.
        input_tokens: Option<u32> = copy,
        /// Cached input tokens (served from the prefix cache), from the server's usage.
        cached_input_tokens: Option<u32> = copy,
        /// Output tokens, from the source in `token_source`.
        output_tokens: u32 = copy,
        /// `server-usage` (the server's `usage`), `chunk-count` (no usage: one per content chunk,
        /// a lower bound) or `usage-rejected` (the server's usage was impossible for the bytes
        /// received and the time taken, so not trusted: one per content chunk).
        token_source: TokenSource = copy,
        /// Function calls the model made.
        tool_calls: u32 = copy,
        /// Where the server's own timing came from: `websocket-timing`, `cerebras-time-info`,
        /// `llamacpp-timings`, `groq-usage` or `openai-processing-ms`; empty when it reported none.
        server_timing_source: Option<String> = (st.map(|s| s.source.clone())),
        /// The server's reported time to first token, ms.
        server_ttft_ms: Option<f64> = (st.and_then(|s| s.ttft_ms).map(ms)),
        /// The server's reported total time, ms.
        server_total_ms: Option<f64> = (st.and_then(|s| s.total_ms).map(ms)),
        /// The server's reported API overhead outside the engine, ms.
        server_api_overhead_ms: Option<f64> = (st.and_then(|s| s.api_overhead_ms).map(ms)),
        /// The server's reported queueing time, ms.
        server_queue_ms: Option<f64> = (st.and_then(|s| s.queue_ms).map(ms)),
        /// `ok`, `http-status`, `connect-error`, `tls-error`, `upgrade-error`, `timeout`,
        /// `truncated`, `stale-connection` (a reused connection closed by the server after the
        /// request was written and before any response byte: the server may have seen it, so it was
        /// not re-sent), `server-error`, `protocol-error`, `too-large` (a response head, SSE line
        /// or event, or WebSocket frame or message over its limit), `local-error` (this machine ran
        /// out of file descriptors or ports), `unsupported-transport` (the transport probe found
        /// that the server does not speak this transport and `--force-transports` ran it anyway;
        /// the error quotes the server's answer) or `cancelled` (cut off by Ctrl-C or the run
        /// deadline, not counted against the server); one server behaviour is one kind on every
        /// transport, see docs/hostile-servers.md (hostile-servers.md).
        outcome: OutcomeKind = copy,
        /// The HTTP status when not 2xx.
        http_status: Option<u16> = copy,
        /// The failure's detail.
        error: Option<String> = copy,
        /// Duration: time to first token, from `intended_ns`.
        ttft_ns: Option<u64> = (r.ttft_ns()),
        /// Duration: end to end, from `intended_ns` to the last content token (to `end_ns` when
        /// there was none).
        e2e_ns: Option<u64> = (r.e2e_ns()),
        /// Duration (fractional): (last − first content arrival) / (output tokens − 1).
        tpot_ns: Option<f64> = (r.tpot_ns().map(|t| crate::units::round_decimals(t, 3))),
        /// Duration: round-trip overhead (see the metric definitions).
        overhead_ns: Option<u64> = (overhead.map(|(o, _)| o)),
        /// `server-timing` or `first-event-estimate`.
        overhead_source: Option<OverheadSource> = (overhead.map(|(_, s)| s)),
        /// Content chunks: this request's rows in `chunks.csv`.
        chunk_count: u32 =
            (u32::try_from(r.chunks.len() as u64 + r.chunks_dropped).unwrap_or(u32::MAX)),
        /// The shard (`run --shard I/N`) that sent the request; empty for an unsharded run.
        /// `sessions.csv` has the same column.
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
mod column_docs;

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

    /// The column tables of `docs/results.md` are generated from the `csv_row!` declarations
    /// above (each column's doc comment and type): a column added here without regenerating
    /// fails this test, and `UPDATE_DOCS=1 cargo test --lib column_tables` rewrites them.
    #[test]
    fn column_tables_in_the_docs_are_generated_from_the_declarations() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/results.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let source = include_str!("rows.rs");
        let mut updated = doc.clone();
        for (file, constant, columns) in [
            ("requests.csv", "REQUEST_COLUMNS", REQUEST_COLUMNS),
            ("chunks.csv", "CHUNK_COLUMNS", CHUNK_COLUMNS),
            ("sessions.csv", "SESSION_COLUMNS", SESSION_COLUMNS),
        ] {
            let declared = super::column_docs::declared(source, constant);
            let names: Vec<&str> = declared.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(
                names, columns,
                "{file}: the parsed declaration is the column list"
            );
            let table = super::column_docs::table(&declared);
            updated = super::column_docs::replace_block(&updated, file, &table)
                .unwrap_or_else(|| panic!("docs/results.md has no generated block for {file}"));
        }
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(path, &updated).unwrap();
        } else {
            assert!(
                updated == doc,
                "docs/results.md's column tables are stale: run `UPDATE_DOCS=1 cargo test --lib column_tables`"
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
